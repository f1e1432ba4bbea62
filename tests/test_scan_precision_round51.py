"""Round 51 (docs/precision/round51.md): a value moved to the host only when it is on CUDA.
From the verdicts since round 14 (fourteen rows, none judged correct): minicons' ``if 'cuda' in
self.device: hidden = hidden.cpu()``, medcat's ``pred.cpu() if pred.is_cuda else pred``.  On
another accelerator the test is false and the value stays on its own device: nothing falls back to
the CPU.  Where the function then needs the host copy (``.numpy()``), the check is an error there
instead; where it cannot tell, the check stays as it was."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_MOVES = '''
    import logging

    import torch

    log = logging.getLogger(__name__)


    class Encoder:
        def __init__(self, device="cpu"):
            self.device = device

        def encode(self, hidden, out):
            if 'cuda' in self.device:  # quiet
                hidden = hidden.cpu()
            out.append(hidden)
            return {"hidden": out, "first": hidden[0].item()}

        def keep(self, scores):
            if scores.device.type == "cuda" and scores.numel() > 0:  # quiet
                scores = scores.detach().cpu()
            self.scores = scores
            log.info("kept %s", scores)
            return scores.tolist()


    def offload(pred):
        return pred.cpu() if pred.is_cuda else pred  # quiet


    def offload_all(batch):
        moved = []
        for x in batch:
            y = x.to("cpu") if x.is_cuda else x  # quiet
            moved.append(y)
        return moved


    def drop(x):
        if x.is_cuda:  # quiet
            x.cpu()
        return x
'''


def test_a_move_to_the_host_that_only_cuda_values_take_is_info(tmp_path: Path) -> None:
    moves = _write(tmp_path, "moves.py", _MOVES + '''

    def pick(x):
        return "cuda" if x.is_cuda else "cpu"  # kept
    ''')
    check_marked_lines([tmp_path], (moves,))
    _, reason = worst_by_line(tmp_path)[("moves.py", 13, "TP003")]
    assert reason.startswith("moves `hidden` to the host only when it is on CUDA"), reason


_KEPT = '''
    import numpy as np
    import torch


    def to_numpy(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return x.detach().numpy()


    def to_array(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return np.asarray(x)


    def mixed(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return x + torch.zeros(3)


    def handed_on(x, write):
        if x.is_cuda:  # kept
            x = x.cpu()
        write(x)


    def other_branch_numpy(pred):
        return pred.cpu().numpy() if pred.is_cuda else pred.numpy()  # kept


    def widened(x, force):
        if x.is_cuda or force:  # kept
            x = x.cpu()
        return x


    def turned(x):
        if not x.is_cuda:  # kept
            x = x.cpu()
        return x


    def with_else(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        else:
            x = x.numpy()
        return x


    def something_else_too(self, x):
        if x.is_cuda:  # kept
            x = x.cpu()
            self.moved = True
        return x


    def another_name(x, y):
        if x.is_cuda:  # kept
            y = x.cpu()
        return y


    def held_on_object(self):
        if self.h.is_cuda:  # kept
            self.h = self.h.cpu()
        return self.h


    def read_in_a_loop(total, steps):
        for _ in range(steps):
            print(total.numpy())
            if total.is_cuda:  # kept
                total = total.cpu()
        return total
'''


def test_a_value_that_still_needs_the_host_keeps_the_finding(tmp_path: Path) -> None:
    kept = _write(tmp_path, "kept.py", _KEPT)
    kept_lines_stay(kept, "TP003")
    found = worst_by_line(tmp_path)
    lines = kept.read_text().splitlines()
    numpy_line = lines.index("    return x.detach().numpy()") + 1
    severity, reason = found[("kept.py", numpy_line - 2, "TP003")]
    assert severity == "error" and f"line {numpy_line} then needs it on the host" in reason, (severity, reason)
    assert found[("kept.py", lines.index("    return np.asarray(x)") - 1, "TP003")][0] == "error"
    choice = next(n for n, text in enumerate(lines, 1) if "else pred.numpy()" in text)
    assert found[("kept.py", choice, "TP003")][0] == "error"
    mixed = lines.index("    return x + torch.zeros(3)") - 1
    assert found[("kept.py", mixed, "TP003")][0] == "silent"  # a mismatch or nothing: not read here


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_what_the_lowered_and_kept_shapes_do_on_a_device_other_than_cuda(tmp_path: Path) -> None:
    """The meta device stands in for MPS or XLA on the CPU build: ``is_cuda`` is False and the
    device is not the CPU.  The lowered shapes hand the value back on its own device; the kept
    ``.numpy()`` raises TypeError there (torch's check is the same for every non-CPU device)."""
    moves = _load(_write(tmp_path, "moves.py", _MOVES), "round51_moves")
    kept = _load(_write(tmp_path, "kept.py", _KEPT), "round51_kept")
    value = torch.ones(3, device="meta")
    assert moves.offload(value).device.type == "meta"
    assert [y.device.type for y in moves.offload_all([value, value])] == ["meta", "meta"]
    out: list = []
    encoder = moves.Encoder(device="meta")
    with pytest.raises(RuntimeError, match="item"):  # a meta tensor has no numbers to read
        encoder.encode(value, out)
    assert out[0].device.type == "meta"
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        kept.to_numpy(value)
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        kept.other_branch_numpy(value)
    cpu = torch.ones(3)
    assert kept.to_numpy(cpu).tolist() == [1.0, 1.0, 1.0]
    assert moves.offload(cpu) is cpu


_REPORTS = '''
    import logging

    import torch

    logger = logging.getLogger(__name__)


    def cleanup_memory():
        if torch.cuda.is_available():  # quiet
            torch.cuda.empty_cache()
            allocated = torch.cuda.memory_allocated() / (1024**3)
            reserved = round(torch.cuda.memory_reserved() / (1024**3), 2)
            logger.info(f"GPU memory: {allocated:.2f} GB allocated, {reserved} GB reserved")


    def release():
        if torch.cuda.is_available():  # quiet
            torch.cuda.empty_cache()
            print("peak", torch.cuda.max_memory_allocated())


    def reading_returned():
        if torch.cuda.is_available():  # kept
            torch.cuda.empty_cache()
            allocated = torch.cuda.memory_allocated()
            logger.info("allocated %d", allocated)
        return allocated


    def reading_used_later(batch):
        if torch.cuda.is_available():  # kept
            free = torch.cuda.memory_allocated()
            logger.info("free %d", free)
            batch = batch[: free // 2**20]
        return batch


    def reading_of_something_else(model):
        if torch.cuda.is_available():  # kept
            torch.cuda.empty_cache()
            size = model.to("cuda").numel()
            logger.info("size %d", size)


    def report_with_a_choice(model):
        if torch.cuda.is_available():  # kept
            logger.info("moving the model")
            model = model.cuda()
        return model


    def timing_figure(start, time):
        if torch.cuda.is_available():  # kept
            torch.cuda.synchronize()
            logger.info("took %.3f", time.perf_counter() - start)
        return time.perf_counter() - start
'''


def test_a_cuda_check_that_only_tunes_and_reports_memory_is_info(tmp_path: Path) -> None:
    """simpletuner's ``cleanup_memory``: empty the cache, read two figures, log them."""
    reports = _write(tmp_path, "reports.py", _REPORTS)
    check_marked_lines([tmp_path], (reports,))
    _, reason = worst_by_line(tmp_path)[("reports.py", 9, "TP003")]
    assert reason.startswith("guards only CUDA tuning or bookkeeping"), reason
