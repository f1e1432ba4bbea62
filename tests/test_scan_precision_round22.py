"""Round 22: four shapes the judges found mostly wrong at error or silent, lowered to info with the
reason in the output, each beside a neighbour that keeps its severity.

- A CUDA check whose choice has the same code on both sides (``0 if torch.cuda.is_available()
  else 0``): nothing differs where CUDA is absent.
- A CUDA check that chooses only a DataLoader's process settings (``num_workers=4 if
  torch.cuda.is_available() else 0``), directly or through a name read only there: speed, not the
  batches.
- ``"cuda"`` alone in a list given to a record class whose other entries in the file list other
  device types (``BackendInfo(device=["cuda"])`` beside ``BackendInfo(device=["cpu", "xpu"])``): a
  capability table, read by membership.
- ``DistributedDataParallel(device_ids=[local_rank])`` in a file that reports the NCCL backend, a
  CUDA device string or ``set_device`` at error: DDP takes device indices for a module on any one
  accelerator, so the line is not the tie; the other line is.

The snippets are written for these tests, shaped after judged findings of judges 9 to 20
(docs/precision/round22.md)."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

_LOADERS = '''
    import torch
    from torch.utils.data import DataLoader


    def train_loader(dataset, batch_size):
        return DataLoader(dataset, batch_size=batch_size, shuffle=True,
                          num_workers=4 if torch.cuda.is_available() else 0)  # quiet


    def demo_loader(dataset):
        num_workers = 0 if torch.cuda.is_available() else 0  # quiet
        return DataLoader(dataset, batch_size=8, num_workers=num_workers)


    def eval_loader(dataset):
        workers = 8 if torch.cuda.is_available() else 2  # quiet
        return DataLoader(dataset, batch_size=32, num_workers=workers, persistent_workers=workers > 0)


    def demo_sizes(dataset):
        n_images_max = 100 if torch.cuda.is_available() else 5  # kept
        return dataset[:n_images_max]


    def sized_by_workers(dataset):
        workers = 2 if torch.cuda.is_available() else 0  # kept
        return DataLoader(dataset, batch_size=workers * 8, num_workers=workers)


    def device_for_loader(dataset):
        device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return DataLoader(dataset, batch_size=8, pin_memory_device=device)
'''


def test_a_choice_of_loader_processes_or_of_the_same_value_is_info(tmp_path: Path) -> None:
    path = _write(tmp_path, "loaders.py", _LOADERS)
    check_marked_lines([path], (path,))


def test_the_reasons_say_what_the_choice_decides(tmp_path: Path) -> None:
    _write(tmp_path, "loaders.py", _LOADERS)
    found = worst_by_line(tmp_path)
    assert found[("loaders.py", 7, "TP003")] == (
        "info", "decides no device: it sets only the data loader's `num_workers=`, how many processes prepare "
                "the batches; the batches are the same")
    assert found[("loaders.py", 11, "TP003")] == ("info", "changes nothing: both branches of the choice are `0`")
    severity, reason = found[("loaders.py", 16, "TP003")]
    assert severity == "info" and "`num_workers=`" in reason


_TABLE = '''
    from dataclasses import dataclass, field


    @dataclass
    class BackendInfo:
        device: list = field(default_factory=list)
        priority: int = 0


    BACKENDS = {}
    BACKENDS["exllamav2"] = BackendInfo(device=["cuda"], priority=5)  # quiet
    BACKENDS["triton"] = BackendInfo(device=["cuda", "xpu"], priority=3)
    BACKENDS["torch"] = BackendInfo(device=["cpu", "cuda", "xpu", "mps"], priority=1)


    def pick(device):
        return next(name for name, info in BACKENDS.items() if device in info.device)


    def launch(start_worker):
        return start_worker(devices=["cuda"])  # kept


    def launch_on_cpu(start_worker):
        return start_worker(devices=["cpu"])


    def launch_first(start_worker):
        return start_worker(devices=["cpu"])


    PINNED = [BackendInfo(device=["cuda:0"]), BackendInfo(device=["cpu"]), BackendInfo(device=["xpu"])]  # kept
'''


def test_cuda_in_a_capability_table_of_records_is_info(tmp_path: Path) -> None:
    """A record class with three entries is a table; a function called with device lists (even three
    times) or an indexed ``"cuda:0"`` names where work runs."""
    path = _write(tmp_path, "backends.py", _TABLE)
    check_marked_lines([path], (path,))
    severity, reason = worst_by_line(tmp_path)[("backends.py", 11, "TP001")]
    assert severity == "info" and reason.startswith("an entry of a capability table: other BackendInfo(device=...)")


def test_cuda_alone_in_a_list_without_a_table_stays_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "one.py", 'from .info import BackendInfo\nCUDA_ONLY = BackendInfo(device=["cuda"])\n')
    assert worst_by_line(tmp_path)[("one.py", 2, "TP001")][0] == "error"


_DDP_TRAIN = '''
    import os

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP


    def setup():
        dist.init_process_group(backend="nccl")  # kept
        return int(os.environ["LOCAL_RANK"])


    def wrap(model, local_rank):
        model = model.to(f"cuda:{local_rank}")  # kept
        return DDP(model, device_ids=[local_rank])  # quiet
'''

_DDP_ALONE = '''
    from torch.nn.parallel import DistributedDataParallel as DDP


    def wrap(model, local_rank):
        return DDP(model, device_ids=[local_rank])  # kept
'''


def test_ddp_device_ids_after_the_cuda_tie_point_at_the_tie(tmp_path: Path) -> None:
    train = _write(tmp_path, "train.py", _DDP_TRAIN)
    alone = _write(tmp_path, "alone.py", _DDP_ALONE)
    check_marked_lines([train, alone], (train, alone))
    severity, reason = worst_by_line(tmp_path)[("train.py", 14, "TP004")]
    assert severity == "info"
    assert reason == ("DistributedDataParallel takes device_ids for a module on any one accelerator and refuses "
                      "them only for a module on the CPU: the choice that ties this path to CUDA is reported at "
                      "line 13")


def test_ddp_device_ids_keep_their_fix(tmp_path: Path) -> None:
    """Lowered, the finding still carries the fix that passes device_ids only off the CPU."""
    from torchport.scan.config import ScanConfig
    from torchport.scan.scanner import scan

    _write(tmp_path, "train.py", _DDP_TRAIN)
    found = next(f for f in scan([tmp_path], ScanConfig(), jobs=1).findings if f.rule_id == "TP004")
    assert found.fix is not None and found.severity_cap == "info"
