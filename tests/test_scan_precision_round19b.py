"""Round 19b: CUDA lines that a user without CUDA does not reach as errors (docs/precision/round19b.md).
The branch of a torch-version test that only an old torch takes, when the other branch uses the
device-generic API; a helper that answers whether an optional CUDA kernel library can be used;
a torch.cuda query that answers False or 0 without CUDA.  Each lowered shape has a kept
neighbour.  The snippets are written for these tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

import pytest

from scan_marks import ALL_TARGETS
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan


def _worst(root: Path) -> dict[tuple[int, str], tuple[str | None, str]]:
    """(line, rule) -> (worst severity over every target, the reason given), for one file."""
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    return {(f.line, f.rule_id): (finding_worst(f, ALL_TARGETS), f.cap_reason) for f in result.findings}


_AGENT = '''
    import torch
    from packaging import version


    class Agent:
        def __init__(self, device, mixed_precision=True):
            self._device_type = torch.device(device).type
            if version.parse(torch.__version__) >= version.parse("2.4"):
                self.scaler = torch.amp.GradScaler(device={new}, enabled=mixed_precision)
            else:
                self.scaler = torch.cuda.amp.GradScaler(enabled=mixed_precision)
'''


def test_grad_scaler_in_the_old_torch_branch_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "agent.py", _AGENT.format(new="self._device_type"))
    severity, reason = _worst(tmp_path)[(11, "TP202")]
    assert severity == "info" and "older than the version named" in reason


def test_grad_scaler_kept_when_the_new_branch_is_cuda_bound_too(tmp_path: Path) -> None:
    _write(tmp_path, "agent.py", _AGENT.format(new='"cuda"'))
    assert _worst(tmp_path)[(11, "TP202")][0] in ("error", "silent")


@pytest.mark.parametrize("test, old_branch_line", [
    ('"2.4" > torch.__version__', 4),
    ('not hasattr(torch.amp, "GradScaler")', 4),
    ("not _NEW_AMP", 4),
])
def test_other_version_tests_and_module_flags(tmp_path: Path, test: str, old_branch_line: int) -> None:
    _write(tmp_path, "train.py", f'''
        import torch
        _NEW_AMP = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 4)
        if {test}:
            scaler = torch.cuda.amp.GradScaler(enabled=True)
        else:
            scaler = torch.amp.GradScaler(device="cpu", enabled=True)
    ''')
    found = _worst(tmp_path)
    assert found[(old_branch_line, "TP202")][0] == "info"


def test_cuda_line_on_the_new_torch_branch_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "train.py", '''
        import torch
        if torch.__version__ >= "2.4":
            scaler = torch.cuda.amp.GradScaler(enabled=True)
        else:
            scaler = None
    ''')
    assert _worst(tmp_path)[(3, "TP202")][0] in ("error", "silent")


_HELPER = '''
    import torch

    try:
        from fastkernels import fused_conv

        _FAST_AVAILABLE = True
    except ImportError:
        _FAST_AVAILABLE = False


    def is_fast_available() -> bool:
        return _FAST_AVAILABLE and torch.cuda.is_available()
'''


def test_kernel_library_availability_helper_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "fast_helper.py", _HELPER + '''

    def build(model):
        if not is_fast_available():
            raise ImportError("fastkernels is not available")
        return fused_conv(model)
    ''')
    severity, reason = _worst(tmp_path)[(12, "TP003")]
    assert severity == "info" and "`_FAST_AVAILABLE` (line 3)" in reason


def test_kernel_library_helper_deciding_a_device_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "fast_helper.py", _HELPER + '''

    def pick_device():
        return torch.device("cuda" if is_fast_available() else "cpu")
    ''')
    assert _worst(tmp_path)[(12, "TP003")][0] in ("error", "silent")


def test_plain_flag_without_import_try_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "fast_helper.py", '''
        import os
        import torch

        _FAST_AVAILABLE = os.environ.get("FAST") == "1"


        def is_fast_available() -> bool:
            return _FAST_AVAILABLE and torch.cuda.is_available()
    ''')
    assert _worst(tmp_path)[(8, "TP003")][0] in ("error", "silent")


def test_is_initialized_for_fork_rng_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "export.py", '''
        import torch


        def export(model, sample):
            cuda_devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
            with torch.random.fork_rng(devices=cuda_devices):
                return model(sample)
    ''')
    severity, reason = _worst(tmp_path)[(5, "TP110")]
    assert severity == "info" and "torch.cuda.is_initialized()" in reason


def test_is_initialized_choosing_cuda_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "export.py", '''
        import torch


        def export(model, sample):
            if torch.cuda.is_initialized():
                sample = sample.to("cuda")
            return model(sample)
    ''')
    assert _worst(tmp_path)[(5, "TP110")][0] in ("error", "silent")


def test_is_initialized_does_not_cover_a_call_that_raises(tmp_path: Path) -> None:
    _write(tmp_path, "export.py", '''
        import torch


        def export(model, sample):
            stats = torch.cuda.ipc_collect()
            return model(sample)
    ''')
    assert _worst(tmp_path)[(5, "TP110")][0] in ("error", "silent")


_ENCODER = '''
    import torch


    class Encoder(torch.nn.Module):
        def __init__(self, layers, amp=True, amp_dtype=torch.float16):
            super().__init__()
            self.layers = layers
            self.amp = amp
            self.amp_dtype = amp_dtype

        def forward(self, x):
            with torch.autocast("cuda", enabled={enabled}, dtype=self.amp_dtype):
                for layer in self.layers:
                    x = layer(x)
            return x
'''


def test_autocast_enabled_only_for_cuda_tensors_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "encoder.py", _ENCODER.format(enabled="self.amp and x.is_cuda"))
    severity, reason = _worst(tmp_path)[(12, "TP201")]
    assert severity == "info" and "`self.amp and x.is_cuda`" in reason


def test_autocast_enabled_off_the_cpu_is_kept(tmp_path: Path) -> None:
    # true on MPS too: there CUDA autocast does nothing while the author asked for AMP
    _write(tmp_path, "encoder.py", _ENCODER.format(enabled='self.amp and x.device.type != "cpu"'))
    assert _worst(tmp_path)[(12, "TP201")][0] in ("error", "silent")


def test_cudagraph_step_mark_under_a_multiline_availability_test_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "matcher.py", '''
        import torch


        def compile_layers(layers, mode):
            if (
                hasattr(torch, "_inductor")
                and torch.cuda.is_available()
            ):
                torch._inductor.cudagraph_mark_step_begin()
            return [torch.compile(layer, mode=mode) for layer in layers]
    ''')
    severity, reason = _worst(tmp_path)[(7, "TP003")]
    assert severity == "info" and "CUDA-graphs step mark" in reason


def test_availability_test_guarding_a_device_choice_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "matcher.py", '''
        import torch


        def compile_layers(layers, mode):
            if (
                hasattr(torch, "_inductor")
                and torch.cuda.is_available()
            ):
                layers = [layer.to("cuda") for layer in layers]
            return [torch.compile(layer, mode=mode) for layer in layers]
    ''')
    assert _worst(tmp_path)[(7, "TP003")][0] in ("error", "silent")


_TIMED = '''
    import logging
    import time

    import torch

    logger = logging.getLogger(__name__)


    def enhance(model, wav):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start_time = time.perf_counter()
        out = model(wav).cpu()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        elapsed_time = time.perf_counter() - start_time
        {use}
        return out
'''


def test_synchronize_for_a_logged_elapsed_time_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "inference.py", _TIMED.format(use='logger.info(f"Elapsed time: {elapsed_time:.3f} s")'))
    found = _worst(tmp_path)
    for line in (10, 14):
        severity, reason = found[(line, "TP003")]
        assert severity == "info" and "only logged or printed" in reason


def test_synchronize_for_a_returned_timing_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "inference.py", _TIMED.format(use="model.timings.append(elapsed_time)"))
    found = _worst(tmp_path)
    assert all(found[(line, "TP003")][0] in ("error", "silent") for line in (10, 14))
