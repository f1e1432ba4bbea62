"""Round 16a: what a CUDA availability check decides (TP003, docs/precision/round16a.md).  A check
that guards only CUDA-only settings (cuDNN switches, emptying the CUDA cache, CUDA seeding after
torch.manual_seed, pinned memory, non-blocking copies) is info with a reason naming them; one whose
path without CUDA raises is error, not silent; one that moves work, syncs a timing or keeps RNG
state stays silent.  The snippets are written for these tests, shaped like the judged code; two are
executed on this CPU build of torch to show what the path without CUDA does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scan_marks import ALL_TARGETS
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan


def _checks(path: Path) -> dict[int, tuple[str | None, str]]:
    """The CUDA checks (TP003) of ``path`` by line: (worst severity, the reason given)."""
    result = scan([path], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    return {f.line: (finding_worst(f, ALL_TARGETS), f.cap_reason) for f in result.findings if f.rule_id == "TP003"}


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


_SETTINGS = '''
    import os
    import torch
    from torch.backends import cudnn


    def make_reproducible(seed):
        torch.manual_seed(seed)
        if torch.cuda.is_available():  # settings
            torch.cuda.manual_seed_all(seed)
            torch.backends.cudnn.deterministic = True
            cudnn.benchmark = False


    def configure(benchmark=None):
        if torch.cuda.is_available():  # local
            if benchmark is None:
                benchmark = os.environ.get("FAST_CONV", "1") == "1"
            cudnn.benchmark = benchmark


    def shutdown():
        if torch.cuda.is_available():  # cache
            try:
                torch.cuda.empty_cache()
            except Exception:
                pass


    def seed_only_cuda(seed):
        if torch.cuda.is_available():  # unseeded
            torch.cuda.manual_seed_all(seed)


    def prepare(model):
        if torch.cuda.is_available():  # moves
            cudnn.benchmark = True
            model = model.cuda()
        return model


    def timed(fn):
        if torch.cuda.is_available():  # sync
            torch.cuda.synchronize()
        return fn()
'''


def test_a_check_guarding_only_cuda_settings_is_info_naming_them(tmp_path):
    path = _write(tmp_path, "reproducibility.py", _SETTINGS)
    checks = _checks(path)
    severity, reason = checks[_line(path, "# settings")]
    assert severity == "info"
    assert reason.startswith("guards CUDA-only settings (torch.cuda.manual_seed_all(), torch.backends.cudnn."
                             "deterministic, cudnn.benchmark)")
    assert reason.endswith("nothing is lost elsewhere")
    # a local only the settings read, and a swallowed try around the cache release
    assert checks[_line(path, "# local")] == ("info", "guards CUDA-only settings (cudnn.benchmark): nothing is "
                                                       "lost elsewhere")
    assert checks[_line(path, "# cache")][0] == "info"
    # CUDA seeding without torch.manual_seed first: other devices stay unseeded
    assert checks[_line(path, "# unseeded")][0] == "silent"
    # a move beside a setting, and a synchronize (it may end a timed region): where work runs
    assert checks[_line(path, "# moves")][0] == "silent"
    assert checks[_line(path, "# sync")][0] == "silent"


_FLAGS = '''
    import torch


    def gather(batches):
        non_blocking, start = torch.cuda.is_available(), -1  # copies
        return [b.to("cpu", non_blocking=non_blocking) for b in batches], start


    class RolloutBuffer:
        def __init__(self, size, options):
            self.pinned = torch.cuda.is_available() and options.get("pin", True)  # pinned
            self.obs = torch.zeros(size)
            if self.pinned and size > 0:
                self.obs = self.obs.pin_memory()


    class Runner:
        def __init__(self):
            self.use_gpu = torch.cuda.is_available()  # placement

        def step(self, x):
            if self.use_gpu:
                x = x.cuda(non_blocking=True)
            return x


    def loader(batches):
        pin = torch.cuda.is_available()  # mixed
        if pin:
            batches = [b.pin_memory() for b in batches]
        device = "cuda" if pin else "cpu"
        return [b.to(device) for b in batches]
'''


def test_a_flag_read_only_for_pinned_memory_or_non_blocking_copies_is_info(tmp_path):
    path = _write(tmp_path, "buffers.py", _FLAGS)
    checks = _checks(path)
    assert checks[_line(path, "# copies")] == (
        "info", "the flag `non_blocking` is read only to turn on CUDA-only settings (non_blocking=): nothing is lost "
                "elsewhere")
    severity, reason = checks[_line(path, "# pinned")]
    assert severity == "info" and "`self.pinned`" in reason and ".pin_memory()" in reason
    # a flag that moves the work, and one read both for pinning and for the device
    assert checks[_line(path, "# placement")][0] == "silent"
    assert checks[_line(path, "# mixed")][0] == "silent"


_RAISES = '''
    import torch


    def build_optimizer(name, params, has_fast_lib):
        if name.startswith("fast"):
            if has_fast_lib and torch.cuda.is_available():  # raises after
                return torch.optim.SGD(params, lr=0.1)
            raise ImportError(f"the fast library and CUDA are required for {name}")
        return torch.optim.Adam(params)


    def pick_backend(model):
        if torch.cuda.is_available():  # raises in else
            return model.cuda()
        else:
            raise RuntimeError("this trainer needs a GPU")


    def fallback(model):
        if torch.cuda.is_available():  # falls back
            return model.cuda()
        return model
'''


def test_a_check_whose_other_path_raises_is_error_not_silent(tmp_path):
    path = _write(tmp_path, "optimizers.py", _RAISES)
    checks = _checks(path)
    assert checks[_line(path, "# raises after")] == (
        "error", f"not silent: where CUDA is absent the other branch raises ImportError (line "
                 f"{_line(path, 'raise ImportError')})")
    # an `else: raise` was already lowered by the detector (info, "raises an explicit error"), which
    # this round leaves as it was: either way it is not called silent
    assert checks[_line(path, "# raises in else")][0] != "silent"
    assert checks[_line(path, "# falls back")][0] == "silent"


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows the path taken without CUDA")
def test_the_path_without_cuda_raises_on_this_cpu_build(tmp_path):
    # the measurement behind the error class: without CUDA the call fails loudly
    _write(tmp_path, "optimizers.py", _RAISES)
    run = subprocess.run([sys.executable, "-c", "import torch, optimizers\n"
                          "optimizers.build_optimizer('fast_sgd', [torch.nn.Parameter(torch.ones(1))], True)"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "ImportError: the fast library and CUDA are required" in run.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows the path taken without CUDA")
def test_seeding_after_manual_seed_gives_the_same_numbers_without_the_cuda_branch(tmp_path):
    # torch.manual_seed seeds every device; the CUDA-only branch changes no CPU draw
    path = _write(tmp_path, "reproducibility.py", _SETTINGS)
    code = "import torch, reproducibility\nreproducibility.make_reproducible(3)\nprint(torch.rand(3).tolist())"
    seeded = subprocess.run([sys.executable, "-c", code], cwd=path.parent, capture_output=True, text=True,
                            timeout=120, check=True).stdout
    torch.manual_seed(3)
    assert seeded.strip() == str(torch.rand(3).tolist())


_REPAIRS = '''
    import torch


    def restore(hparams, rebuild):
        hparams["metrics"] = [
            rebuild(m) if not hasattr(m, "state") or (not torch.cuda.is_available() and m.device.type != "cpu")  # list
            else m
            for m in hparams["metrics"]
        ]
        loss = hparams["loss"]
        if not torch.cuda.is_available() and loss.device.type != "cpu":  # repair
            hparams["loss"] = rebuild(loss)
        if not torch.cuda.is_available() and loss.device.type != "cpu":  # moves
            hparams["loss"] = loss.to("cpu")
        return hparams
'''


def test_a_branch_without_cuda_that_only_repairs_a_value_left_off_the_cpu_is_info(tmp_path):
    path = _write(tmp_path, "checkpoint.py", _REPAIRS)
    checks = _checks(path)
    for mark in ("# list", "# repair"):
        severity, reason = checks[_line(path, mark)]
        assert severity == "info" and "a value already off the CPU" in reason and "names no device" in reason
    # the same test whose branch moves the value to the CPU chooses a device
    assert checks[_line(path, "# moves")][0] == "silent"


_OVERWRITTEN = '''
    import torch


    def pick_device():
        if torch.cuda.is_available:  # overwritten
            device = torch.device("cuda")
        if torch.backends.mps.is_available():
            device = torch.device("mps")
        else:
            device = torch.device("cpu")
        return device


    def pick_device_kept():
        device = torch.device("cpu")
        if torch.cuda.is_available():  # kept
            device = torch.device("cuda")
        if torch.distributed.is_initialized():
            device = torch.device("cpu")
        return device
'''


def test_a_branch_whose_value_the_next_statement_always_overwrites_decides_nothing(tmp_path):
    path = _write(tmp_path, "devices.py", _OVERWRITTEN)
    checks = _checks(path)
    assert checks[_line(path, "# overwritten")] == (
        "info", f"decides nothing: what this branch sets (`device`) is set again on every path by the next "
                f"statement (line {_line(path, '# overwritten') + 2}) before it is read")
    assert checks[_line(path, "# kept")][0] == "silent"
