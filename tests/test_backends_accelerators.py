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
from torchport.backends.tpu import TpuChip, find_tpus, tpu_availability, vfio_groups
from torchport.launch import run_worker
from torchport.records import ErrorKind, RunStatus

EVALUATE_JOB = "torchport.protocol:evaluate_job"


def pci_device(root: Path, address: str, vendor: str, device: str, iommu_group: str | None = None) -> None:
    folder = root / "sys/bus/pci/devices" / address
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "device").write_text(device + "\n")
    if iommu_group is not None:  # as in sysfs: a link to /sys/kernel/iommu_groups/N
        groups = root / "sys/kernel/iommu_groups" / iommu_group
        groups.mkdir(parents=True, exist_ok=True)
        (folder / "iommu_group").symlink_to(groups)


@pytest.fixture
def tpu_host(tmp_path) -> Path:
    """A machine with one TPU v5e chip (IOMMU group 7), a Google gVNIC (same
    PCI vendor, not a TPU) and a virtio disk."""
    root = tmp_path / "tpu-host"
    pci_device(root, "0000:00:04.0", "0x1ae0", "0x0063", iommu_group="7")
    pci_device(root, "0000:00:05.0", "0x1ae0", "0x0042", iommu_group="8")
    pci_device(root, "0000:00:06.0", "0x1af4", "0x1042")
    return root


@pytest.fixture
def no_tpu_environment(tmp_path, monkeypatch):
    """An empty torchport cache: no tpu environment to fall back on."""
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path / "cache"))


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
    assert find_tpus(tpu_host) == [TpuChip(address="0000:00:04.0", pci_device="0x0063", generation="TPU v5e",
                                           iommu_group="7", vfio=False)]
    assert find_tpus(tpu_host.parent / "empty") == []


def test_tpu_availability_names_what_is_missing(tpu_host, tmp_path, packages, no_tpu_environment):
    empty = tmp_path / "no-tpu"
    assert tpu_availability(empty).reason == (
        "torch_tpu is not installed in this interpreter and the tpu environment does not exist "
        "(run: torchport env create tpu)")
    assert tpu_availability(tpu_host).reason.endswith("; this machine has TPU v5e x1 (PCI 0x0063) on the PCI bus")

    packages("torch_tpu", "torch_tpu", "0.2.0")
    no_chip = tpu_availability(empty).reason
    assert no_chip.startswith("torch_tpu 0.2.0 importable (this interpreter); no TPU chip on this machine (probed in ")
    assert no_chip.endswith("0 PCI device(s) under /sys/bus/pci/devices, none a Google TPU (vendor 0x1ae0, device "
                            "0x005e/0x0063/0x0062/0x006f/0x0076); 0 VFIO group(s) under /dev/vfio; "
                            "0 /dev/accel* node(s))")
    # A TPU whose IOMMU group is not exposed through VFIO is one torch_tpu
    # would not initialize: another group being there does not count.
    (tpu_host / "dev/vfio").mkdir(parents=True)
    (tpu_host / "dev/vfio/vfio").touch()
    (tpu_host / "dev/vfio/8").touch()
    (tpu_host / "dev/accel0").touch()
    not_exposed = tpu_availability(tpu_host)
    assert not not_exposed.available
    assert not_exposed.reason == (
        "torch_tpu 0.2.0 importable (this interpreter); TPU v5e x1 (PCI 0x0063) on the PCI bus, but none exposed "
        "through VFIO (/dev/vfio/<IOMMU group>): torch_tpu would not initialize them; /dev/accel0 belong to the "
        "older TPU driver, which torch_tpu 0.2.0 does not use")
    (tpu_host / "dev/vfio/7").touch()
    assert vfio_groups(tpu_host) == ["7", "8"]
    assert tpu_availability(tpu_host).reason.endswith("but libtpu is not installed (pip install libtpu)")

    packages("libtpu", "libtpu", "0.0.50")
    available = tpu_availability(tpu_host)
    assert available.available
    assert available.reason == "TPU v5e x1 (PCI 0x0063); torch_tpu 0.2.0, libtpu 0.0.50 (this interpreter)"


def test_tpu_availability_uses_the_tpu_environment(tmp_path, monkeypatch, tpu_host):
    """Without torch_tpu in this interpreter, a created tpu environment is
    where the workers run; its manifest says which versions (nothing imported)."""
    from torchport import envs

    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path / "cache"))
    folder = envs.env_dir("tpu")
    (folder / "bin").mkdir(parents=True)
    (folder / "bin/python").symlink_to(sys.executable)
    (folder / envs.MANIFEST).write_text(json.dumps({
        "name": "tpu", "requirements": list(envs.spec_for("tpu").requirements),
        "installed": {"torch": "2.13.0+cpu", "torch_tpu": "0.2.0", "libtpu": "0.0.52"}}))
    assert tpu_availability(tmp_path / "no-tpu").reason.startswith(
        "torch_tpu 0.2.0 importable (tpu environment); no TPU chip on this machine (probed in ")
    (tpu_host / "dev/vfio").mkdir(parents=True)
    (tpu_host / "dev/vfio/7").touch()
    assert tpu_availability(tpu_host).as_dict() == {
        "available": True, "reason": "TPU v5e x1 (PCI 0x0063); torch_tpu 0.2.0, libtpu 0.0.52 (tpu environment)"}


def test_neuron_availability_names_what_is_missing(tmp_path, packages):
    host = tmp_path / "trn-host"
    (host / "dev").mkdir(parents=True)
    missing = neuron_availability(host).reason
    assert missing.startswith("torch-neuronx is not installed in this interpreter")
    # The package index's torch-neuronx is a placeholder: never suggested.
    assert "pip install torch-neuronx" not in missing and "2022 placeholder (1.0)" in missing

    packages("torch-neuronx", "torch_neuronx", "2.9.0")
    assert neuron_availability(host).reason == (
        "torch-neuronx 2.9.0 is the legacy XLA-based library; the native neuron device needs torch-neuronx 2.14+")


def test_neuron_placeholder_from_the_package_index_is_named(tmp_path, packages):
    host = tmp_path / "trn-host"
    (host / "dev").mkdir(parents=True)
    packages("torch-neuronx", "torch_neuronx", "1.0")
    assert neuron_availability(host).reason == (
        "torch-neuronx 1.0 is the package index's placeholder, not the Neuron SDK (its import raises \"WRONG "
        "PACKAGE\"); install torch-neuronx 2.14+ from AWS's Neuron pip repository")


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
    from torchport import envs

    rows = {row["name"]: row for row in json.loads(torchport_cli("backends", "--json").stdout)}
    tpu_environment = envs.status("tpu")["ready"]
    for name in ("tpu", "tpu-fused", "tpu-compile"):
        assert not rows[name]["available"]
        if tpu_environment:
            assert rows[name]["reason"].startswith("torch_tpu 0.2.0 importable (tpu environment); "
                                                   "no TPU chip on this machine (probed in ")
            assert rows[name]["environment"] == "tpu"
        else:
            assert rows[name]["reason"].startswith("torch_tpu is not installed in this interpreter")
        assert rows[name]["verification"] == "API verified against torch_tpu 0.2.0; not run on TPU hardware"
    for name in ("neuron", "neuron-compile"):
        assert not rows[name]["available"]
        assert rows[name]["reason"].startswith("torch-neuronx is not installed in this interpreter")
        assert rows[name]["verification"] == "implemented from the published API; not run on real hardware"
    assert rows["tpu-compile"]["compiles"] and rows["neuron-compile"]["compiles"]


@pytest.mark.parametrize("backend", ["tpu-fused", "neuron-compile"])
def test_worker_of_an_unavailable_accelerator_ends_with_its_reason(backend):
    """The worker checks availability itself before importing anything (in the
    tpu environment, where torch_tpu is importable, it says so)."""
    from torchport import backends

    result = run_worker(backend, EVALUATE_JOB, app="builtin:classifier", timeout=120)
    assert result.status == RunStatus.ERROR and result.error is not None
    assert result.error.kind == ErrorKind.ENVIRONMENT
    parent = backends.availability(backend).reason
    if backend.startswith("tpu") and "importable" in parent:
        assert result.error.message.startswith("torch_tpu 0.2.0 importable (this interpreter); "
                                                     "no TPU chip on this machine")
    else:
        assert result.error.message == parent
    assert result.training is None and "training" not in result.to_dict()
