"""AWS Trainium through TorchNeuron (``torch-neuronx`` 2.14+, device ``neuron``).

TorchNeuron is the native PyTorch backend of the Neuron SDK: an out-of-tree
PrivateUse1 device, eager by default, plus ``torch.compile(backend="neuron")``.
torch-neuronx releases before 2.14 are the older XLA-based library (device
``xla``), which these backends do not drive.

None of this has run on Trainium in torchport's test suite: it follows the
published Neuron documentation (see docs/backends.md).  Like the TPU backends,
the workers run in torchport's own interpreter (torch-neuronx installs next to
the user's torch), and availability never imports torch_neuronx in the parent:
it looks for the package and for /dev/neuron* device files.

The package index's ``torch-neuronx`` is not the SDK: it is a 1.4 KB
placeholder (1.0, September 2022) whose import raises "WRONG PACKAGE. Please
install the package from Neuron Repository".  The real torch-neuronx comes only
from AWS's own Neuron pip repository, so torchport never suggests
``pip install torch-neuronx`` on its own, and names the placeholder when it
finds it installed.
"""
from __future__ import annotations

from pathlib import Path

from torchport import glossary
from torchport.backends import NOT_VERIFIED, Availability
from torchport.backends.accelerator import AcceleratorBackend, installed_version, release
from torchport.records import DeviceMemory

NATIVE_SINCE = (2, 14)
# The package index's torch-neuronx: a placeholder, not the Neuron SDK.
INDEX_PLACEHOLDER = "1.0"
REAL_SDK = ("which comes only from AWS's Neuron pip repository; the package index's torch-neuronx is a 2022 "
            "placeholder (1.0) whose import raises \"WRONG PACKAGE\"")


def neuron_devices(root: Path | str = "/") -> list[str]:
    """Neuron device files (/dev/neuron0, /dev/neuron1, ...): one per Neuron device."""
    return sorted(path.name for path in (Path(root) / "dev").glob("neuron*") if path.name[len("neuron"):].isdigit())


def neuron_availability(root: Path | str = "/") -> Availability:
    devices = neuron_devices(root)
    on_host = f"; this machine has {len(devices)} Neuron device(s) (/dev/{devices[0]}...)" if devices else ""
    version = installed_version("torch-neuronx", "torch_neuronx")
    if version is None:
        return Availability(False, f"torch-neuronx is not installed in this interpreter (the native neuron device "
                                   f"needs torch-neuronx 2.14+, {REAL_SDK}){on_host}")
    if version == INDEX_PLACEHOLDER:
        return Availability(False, f"torch-neuronx {version} is the package index's placeholder, not the Neuron SDK "
                                   f"(its import raises \"WRONG PACKAGE\"); install torch-neuronx 2.14+ from AWS's "
                                   f"Neuron pip repository{on_host}")
    if release(version) < NATIVE_SINCE:
        return Availability(False, f"torch-neuronx {version} is the legacy XLA-based library; the native "
                                   f"neuron device needs torch-neuronx 2.14+{on_host}")
    if not devices:
        return Availability(False, f"torch-neuronx {version} installed but no Neuron device (/dev/neuron*)")
    return Availability(True, f"{len(devices)} Neuron device(s); torch-neuronx {version}")


class Neuron(AcceleratorBackend):
    name = "neuron"
    title = "AWS Trainium (TorchNeuron), eager"
    device_type = "neuron"
    vendor_module = "torch_neuronx"
    family = glossary.NEURON
    verification = NOT_VERIFIED
    process_group_backend = "neuron"

    @classmethod
    def availability(cls) -> Availability:
        return neuron_availability("/")

    def device_info(self) -> dict[str, str | int | None]:
        import torch

        return {
            "device": str(self.device),
            "devices": torch.accelerator.device_count(),
            "torch_neuronx": installed_version("torch-neuronx", "torch_neuronx"),
        }

    def synchronize(self) -> None:
        import torch

        # Neuron's documented barrier; its allocator is asynchronous, so this
        # also has to come before reading memory statistics.
        torch.neuron.synchronize()  # type: ignore[attr-defined]  # added by torch_neuronx at import

    def device_memory(self) -> DeviceMemory | None:
        self.synchronize()
        return super().device_memory()


class NeuronCompile(Neuron):
    name = "neuron-compile"
    title = "AWS Trainium (TorchNeuron), torch.compile(backend=\"neuron\")"
    compile_backend = "neuron"
