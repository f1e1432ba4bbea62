"""Round 20b: in-file shapes from judge 16's verdicts.  A CUDA check whose branch only builds text a
log line shows, or only adds ``ProfilerActivity.CUDA`` to what a profiler records, decides no device;
a CUDA query inside an f-string whose only device word is compared with is text; a CUDA stream call
past ``if comm is None: return``, where ``comm`` is typed as a CUDA stream or None, runs only where
CUDA is.  Each is info; the neighbours that decide a device or use a stream unconditionally keep
their severity.  The snippets are written for these tests, shaped like the judged code
(docs/precision/round20b.md)."""
from __future__ import annotations

from pathlib import Path

from scan_marks import ALL_TARGETS
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan


def _found(root: Path, rule: str) -> dict[int, tuple[str | None, str]]:
    """line -> (worst severity over every target, the reason given) of each ``rule`` finding."""
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    return {f.line: (finding_worst(f, ALL_TARGETS), f.cap_reason or "")
            for f in result.findings if f.rule_id == rule}


_KERNEL_REPORT = '''
    import logging

    import torch

    logger = logging.getLogger(__name__)


    def report_kernels(model):
        lines = []
        for name, module in model.named_modules():
            lines.append(f"{name}: {type(module).__name__}")
        if torch.cuda.is_available():
            dtype = next(model.parameters()).dtype
            supported = grouped_mm_supported(torch.cuda.current_device(), dtype)
            lines.append(f"grouped_mm {dtype}: {supported}")
        logger.debug("Model kernels:\\n  %s", "\\n  ".join(lines))
        {ending}
'''


def test_branch_that_only_adds_a_logged_line_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "kernels.py", _KERNEL_REPORT.replace("{ending}", "return None"))
    severity, reason = _found(tmp_path, "TP003")[12]
    assert severity == "info"
    assert "log line" in reason


def test_branch_whose_lines_are_returned_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "kernels.py", _KERNEL_REPORT.replace("{ending}", "return lines"))
    assert _found(tmp_path, "TP003")[12][0] == "silent"


def test_branch_that_also_moves_the_model_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "kernels.py", _KERNEL_REPORT.replace(
        'lines.append(f"grouped_mm {dtype}: {supported}")', 'model.to("cuda")').replace("{ending}", "return None"))
    assert _found(tmp_path, "TP003")[12][0] == "silent"


_PROFILER = '''
    import torch
    from torch.profiler import ProfilerActivity, profile


    def traced(step, path):
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
            {extra}
        with profile(activities=activities) as prof:
            step()
        prof.export_chrome_trace(path)
'''


def test_branch_adding_the_cuda_profiler_activity_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "trace.py", _PROFILER.replace("{extra}", ""))
    severity, reason = _found(tmp_path, "TP003")[7]
    assert severity == "info"
    assert "ProfilerActivity.CUDA" in reason


def test_branch_that_also_picks_a_device_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "trace.py", _PROFILER.replace("{extra}", "step.device = torch.device('cuda')"))
    assert _found(tmp_path, "TP003")[7][0] == "silent"


def test_gpu_memory_shown_in_a_progress_bar_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "loop.py", '''
        import torch


        def train(loader, model, bar):
            for batch in loader:
                loss = model(batch)
                gpu_mem = torch.cuda.memory_allocated() / 1e9 if torch.cuda.is_available() else 0
                shown = describe(loss, gpu=gpu_mem)
                bar.set_postfix(**shown)
    ''')
    severity, reason = _found(tmp_path, "TP003")[7]
    assert severity == "info"
    assert "progress bar" in reason


def test_value_that_also_sizes_a_batch_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "loop.py", '''
        import torch


        def train(loader, model, bar):
            for batch in loader:
                gpu_mem = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else 0
                shown = describe(model, gpu=gpu_mem)
                bar.set_postfix(**shown)
                model.step(batch, chunk=gpu_mem // 2)
    ''')
    assert _found(tmp_path, "TP003")[6][0] == "silent"


def test_device_count_in_a_summary_beside_a_compared_device_word_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "summary.py", '''
        import logging

        import torch

        logger = logging.getLogger(__name__)


        def log_training_params(num_gpus, device):
            msg = (
                "TRAINING PARAMETERS:\\n"
                f"    - Number of GPUs: {num_gpus if 'cuda' in device else 0} ({torch.cuda.device_count()} available)\\n"
            )
            logger.info(msg)
    ''')
    severity, reason = _found(tmp_path, "TP004")[11]
    assert severity == "info"
    assert "becomes text" in reason


def test_device_count_in_text_that_names_a_device_is_not_info(tmp_path: Path) -> None:
    _write(tmp_path, "last.py", '''
        import torch


        def to_last_device(model):
            name = f"{'cuda' if model.on_gpu else 'cpu'}:{torch.cuda.device_count() - 1}"
            return model.to(name)
    ''')
    assert _found(tmp_path, "TP004")[5][0] != "info"


_SIDE_STREAM = '''
    from contextlib import contextmanager

    import torch


    @contextmanager
    def on_comm_stream(comm{annotation}):
        {guard}
        comm.wait_stream(torch.cuda.current_stream(comm.device))
        with torch.cuda.stream(comm):
            yield


    def wait_for(event: torch.cuda.Event | None) -> None:
        if event is not None:
            torch.cuda.current_stream().wait_event(event)
'''


def test_stream_calls_past_a_none_stream_exit_are_info(tmp_path: Path) -> None:
    _write(tmp_path, "exchange.py", _SIDE_STREAM.replace("{annotation}", ": torch.cuda.Stream | None").replace(
        "{guard}", "if comm is None:\n            yield\n            return"))
    found = _found(tmp_path, "TP107")
    for line in (11, 12, 18):
        severity, reason = found[line]
        assert severity == "info", line
        assert "CUDA stream or event" in reason


def test_stream_used_without_the_none_test_stays_error(tmp_path: Path) -> None:
    _write(tmp_path, "exchange.py", _SIDE_STREAM.replace("{annotation}", ": torch.cuda.Stream | None").replace(
        "{guard}", "pass"))
    found = _found(tmp_path, "TP107")
    assert found[9][0] == "error"
    assert found[10][0] == "error"


def test_untyped_stream_past_a_none_test_stays_error(tmp_path: Path) -> None:
    _write(tmp_path, "exchange.py", _SIDE_STREAM.replace("{annotation}", "").replace(
        "{guard}", "if comm is None:\n            yield\n            return"))
    found = _found(tmp_path, "TP107")
    assert found[11][0] == "error"
    assert found[12][0] == "error"
