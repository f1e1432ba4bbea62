"""Round 18c (docs/precision/round18c.md): a ``"cuda"`` device that a line only compares with, and a
worker default that ``torch.multiprocessing.spawn``'s ``args=`` fill.
``if device == torch.device("cuda"):`` builds a plain value and compares it: the line needs no GPU
and answers False where CUDA is absent, so its TP001 is info; what the comparison guards is its
own line and keeps its severity.  The snippets are written for these tests, shaped like the
judged code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import worst_by_line
from scan_marks import write_snippet as _write
from torchport.scan.rules import CUDA_DEVICE_STRING


_PARSE_DEVICE = '''
    import torch


    def parse_device(device):
        device = torch.device(device)
        if device == torch.device("cuda"):
            device = torch.device("cuda:0")
        return device
'''

_SAMPLER = '''
    import torch


    class Sampler:
        def register_buffer(self, name, attr):
            if type(attr) == torch.Tensor:
                if attr.device != torch.device("cuda"):
                    attr = attr.to(torch.device("cuda"))
            setattr(self, name, attr)
'''


def test_a_cuda_device_only_compared_with_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "tabkit/utils.py", _PARSE_DEVICE)
    _write(tmp_path, "tabkit/sampler.py", _SAMPLER)
    found = worst_by_line(tmp_path)
    for key in (("utils.py", 6, CUDA_DEVICE_STRING), ("sampler.py", 7, CUDA_DEVICE_STRING)):
        severity, reason = found[key]
        assert severity == "info", key
        assert "only compared with" in reason


def test_what_the_comparison_guards_keeps_its_severity(tmp_path: Path) -> None:
    # The judged-correct neighbour: moving the buffer to CUDA fails where CUDA is absent.
    _write(tmp_path, "tabkit/sampler.py", _SAMPLER)
    assert worst_by_line(tmp_path)[("sampler.py", 8, CUDA_DEVICE_STRING)][0] == "error"


def test_a_device_made_and_compared_on_one_line_stays(tmp_path: Path) -> None:
    # `x.to(torch.device("cuda"))` beside the comparison places memory on CUDA: not a comparison only.
    _write(tmp_path, "tabkit/move.py", '''
        import torch


        def to_gpu(x):
            return x if x.device == torch.device("cuda") else x.to(torch.device("cuda"))
    ''')
    assert worst_by_line(tmp_path)[("move.py", 5, CUDA_DEVICE_STRING)][0] == "error"


def test_a_compared_device_that_is_also_returned_stays(tmp_path: Path) -> None:
    # `torch.device("cuda") if ... else ...` chooses the device: the value is used, not compared.
    _write(tmp_path, "tabkit/pick.py", '''
        import torch


        def pick(values):
            any_cuda = any(v.device == torch.device("cpu") for v in values)
            return torch.device("cuda") if any_cuda else torch.device("cpu")
    ''')
    assert worst_by_line(tmp_path)[("pick.py", 6, CUDA_DEVICE_STRING)][0] == "error"


_LAUNCHER = '''
    import torch.multiprocessing as mp


    def _distributed_worker(local_rank, main_func, world_size, device_type="cuda"):
        main_func(local_rank, world_size, device_type)


    def launch(main_func, world_size, device_type="cpu"):
        mp.spawn(_distributed_worker, nprocs=world_size, args=(main_func, world_size, device_type))
'''


def test_a_worker_default_that_spawn_args_fill_is_info(tmp_path: Path) -> None:
    # spawn calls fn(process_index, *args): the third item of args fills device_type.
    _write(tmp_path, "trainkit/train.py", _LAUNCHER)
    severity, reason = worst_by_line(tmp_path)[("train.py", 4, CUDA_DEVICE_STRING)]
    assert severity == "info"
    assert "_distributed_worker is started only by" in reason


def test_a_worker_default_that_spawn_args_leave_unset_stays(tmp_path: Path) -> None:
    # args= stops before device_type: the worker runs with its "cuda" default.
    _write(tmp_path, "trainkit/train.py", _LAUNCHER.replace("args=(main_func, world_size, device_type)",
                                                            "args=(main_func, world_size)"))
    assert worst_by_line(tmp_path)[("train.py", 4, CUDA_DEVICE_STRING)][0] == "error"


def test_a_spawned_worker_also_called_directly_stays(tmp_path: Path) -> None:
    _write(tmp_path, "trainkit/train.py", _LAUNCHER + '''

    def run_single(main_func):
        _distributed_worker(0, main_func, 1)
''')
    assert worst_by_line(tmp_path)[("train.py", 4, CUDA_DEVICE_STRING)][0] == "error"
