"""TPU (TorchTPU) and Trainium (TorchNeuron) backends without the hardware.

What can be tested here is tested for real: device discovery reads a folder
laid out like /sys and /dev (the probes take the filesystem root as a
parameter), package discovery finds distributions placed on sys.path, and the
worker of a backend that cannot run ends with that backend's reason.  The
device paths themselves (torch_tpu, torch_neuronx) have not run on hardware.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchport.backends.neuron import neuron_availability, neuron_devices
from torchport.backends.tpu import find_tpus, tpu_availability, vfio_groups
from torchport.launch import run_worker

EVALUATE_JOB = "torchport.protocol:evaluate_job"


def pci_device(root: Path, address: str, vendor: str, device: str) -> None:
    folder = root / "sys/bus/pci/devices" / address
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "device").write_text(device + "\n")


@pytest.fixture
def tpu_host(tmp_path) -> Path:
    """A machine with one TPU v5e chip, a Google gVNIC (same PCI vendor, not a
    TPU) and a virtio disk."""
    root = tmp_path / "tpu-host"
    pci_device(root, "0000:00:04.0", "0x1ae0", "0x0063")
    pci_device(root, "0000:00:05.0", "0x1ae0", "0x0042")
    pci_device(root, "0000:00:06.0", "0x1af4", "0x1042")
    return root


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Install a distribution's metadata and a module that refuses to be
    imported: availability must find it without importing it."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def install(distribution: str, module: str, version: str) -> None:
        info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
        (site / module).mkdir()
        (site / module / "__init__.py").write_text(
            f"raise ImportError('{module} must not be imported to decide availability')\n")

    yield install
    for name in ("torch_tpu", "libtpu", "torch_neuronx"):
        assert name not in sys.modules, f"availability imported {name}"


def test_only_tpu_device_ids_count_as_tpus(tpu_host):
    assert find_tpus(tpu_host) == [{"address": "0000:00:04.0", "pci_device": "0x0063", "generation": "TPU v5e"}]
    assert find_tpus(tpu_host.parent / "empty") == []


def test_tpu_availability_names_what_is_missing(tpu_host, tmp_path, packages):
    empty = tmp_path / "no-tpu"
    assert tpu_availability(empty).reason == (
        "torch_tpu is not installed in this interpreter (pip install torch_tpu; needs torch>=2.11)")
    assert tpu_availability(tpu_host).reason.endswith("; this machine has TPU v5e x1 (PCI 0x0063) on the PCI bus")

    packages("torch_tpu", "torch_tpu", "0.2.0")
    assert tpu_availability(empty).reason == "torch_tpu 0.2.0 installed but no TPU on the PCI bus (vendor 0x1ae0)"
    no_vfio = tpu_availability(tpu_host)
    assert not no_vfio.available and "no VFIO group under /dev/vfio" in no_vfio.reason

    (tpu_host / "dev/vfio").mkdir(parents=True)
    (tpu_host / "dev/vfio/vfio").touch()
    assert not tpu_availability(tpu_host).available  # the control node alone is not a group
    (tpu_host / "dev/vfio/0").touch()
    assert vfio_groups(tpu_host) == ["0"]
    assert tpu_availability(tpu_host).reason.endswith("but libtpu is not installed (pip install libtpu)")

    packages("libtpu", "libtpu", "0.0.50")
    available = tpu_availability(tpu_host)
    assert available.available
    assert available.reason == "TPU v5e x1 (PCI 0x0063); torch_tpu 0.2.0, libtpu 0.0.50"


def test_neuron_availability_names_what_is_missing(tmp_path, packages):
    host = tmp_path / "trn-host"
    (host / "dev").mkdir(parents=True)
    assert neuron_availability(host).reason.startswith("torch-neuronx is not installed in this interpreter")

    packages("torch-neuronx", "torch_neuronx", "2.9.0")
    assert neuron_availability(host).reason == (
        "torch-neuronx 2.9.0 is the legacy XLA-based library; the native neuron device needs torch-neuronx 2.14+")


def test_native_neuron_needs_device_files(tmp_path, packages):
    host = tmp_path / "trn-host"
    (host / "dev").mkdir(parents=True)
    (host / "dev/neuron_monitor").touch()  # not a device
    packages("torch-neuronx", "torch_neuronx", "2.14.1")
    assert neuron_availability(host).reason == "torch-neuronx 2.14.1 installed but no Neuron device (/dev/neuron*)"
    for index in range(2):
        (host / f"dev/neuron{index}").touch()
    assert neuron_devices(host) == ["neuron0", "neuron1"]
    assert neuron_availability(host).as_dict() == {"available": True,
                                                   "reason": "2 Neuron device(s); torch-neuronx 2.14.1"}


def test_backends_command_lists_native_accelerators_as_unavailable(torchport_cli):
    rows = {row["name"]: row for row in json.loads(torchport_cli("backends", "--json").stdout)}
    for name in ("tpu", "tpu-fused", "tpu-compile"):
        assert not rows[name]["available"]
        assert rows[name]["reason"].startswith("torch_tpu is not installed in this interpreter")
        assert rows[name]["verification"] == "implemented from the published API; not run on real hardware"
    for name in ("neuron", "neuron-compile"):
        assert not rows[name]["available"]
        assert rows[name]["reason"].startswith("torch-neuronx is not installed in this interpreter")
    assert rows["tpu-compile"]["compiles"] and rows["neuron-compile"]["compiles"]


@pytest.mark.parametrize("backend", ["tpu-fused", "neuron-compile"])
def test_worker_of_an_unavailable_accelerator_ends_with_its_reason(backend):
    from torchport import backends

    result = run_worker(backend, EVALUATE_JOB, app="builtin:classifier", timeout=120)
    assert result["status"] == "error"
    assert result["error"]["kind"] == "environment"
    assert result["error"]["message"] == backends.availability(backend).reason
    assert "training" not in result
