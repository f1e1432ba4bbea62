"""Round 51 (docs/precision/round51.md): a value moved to the host only when it is on CUDA.
From the verdicts since round 14 (fourteen rows, none judged correct): minicons' ``if 'cuda' in
self.device: hidden = hidden.cpu()``, medcat's ``pred.cpu() if pred.is_cuda else pred``.  On
another accelerator the test is false and the value stays on its own device: nothing falls back to
the CPU.  Where the function then needs the host copy (``.numpy()``), the check is an error there
instead; where it cannot tell, the check stays as it was: the shapes an independent review found
lowered wrongly in the first version (a value collected and concatenated, ``torch.log`` read as a
logger, a store into an array, ``x +=``, ``detach`` only on the CUDA path, a ``global``, a closure)
and the ``.numpy()`` reads it found called errors wrongly (under a test, in a ``try``, of a name bound
again, ``np.shape``) are kept lines."""
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
            return {"hidden": [hidden], "first": hidden[0].item(), "rows": hidden.shape[0]}

        def keep(self, scores):
            if scores.numel() > 0 and scores.device.type == "cuda":  # quiet
                scores = scores.contiguous().cpu()
            log.info("kept %s", scores)
            return scores.tolist()


    def offload(pred):
        return pred.cpu() if pred.is_cuda else pred  # quiet


    def count(batch):
        total = 0
        for x in batch:
            y = x.to("cpu") if x.is_cuda else x  # quiet
            total += y.numel()
        return total


    def offload_each(batch):
        for x in batch:
            if x.is_cuda:  # quiet
                x = x.cpu()
            print(x)


    def drop(x):
        if torch.is_tensor(x) and x.is_cuda:  # quiet
            x.cpu()
        return x


    def listed(y_pred):
        if y_pred.is_cuda:  # quiet
            y_pred = y_pred.cpu()
        return [float(v) for v in y_pred.tolist()]
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

    peak = None


    def to_numpy(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return x.clone().numpy()


    def detached_to_numpy(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return x.detach().numpy()


    def numpy_without_grad(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        with torch.no_grad():
            return x.numpy()


    def to_array(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return np.asarray(x)


    def mixed(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return x + torch.zeros(3)


    def added_in_place(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        x += torch.zeros(3)
        return x


    def handed_on(x, write):
        if x.is_cuda:  # kept
            x = x.cpu()
        write(x)


    def collected(batches, model):
        preds = []
        for b in batches:
            p = model(b)
            if p.is_cuda:  # kept
                p = p.cpu()
            preds.append(p)
        return np.concatenate(preds)


    def through_torch_log(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        torch.log(x)
        return x


    def recorded(x, recorder):
        if x.is_cuda:  # kept
            x = x.cpu()
        recorder.info(x)
        return x


    def into_an_array(x, out):
        if x.is_cuda:  # kept
            x = x.cpu()
        out[:] = x
        return out


    def detached_on_cuda_only(x):
        if x.is_cuda:  # kept
            x = x.detach().cpu()
        return x


    def kept_globally(x):
        global peak
        if x.is_cuda:  # kept
            x = x.cpu()
        peak = x
        return x


    def read_by_a_closure(x):
        def later():
            return x.numpy()
        if x.is_cuda:  # kept
            x = x.cpu()
        print(x)
        return later


    def other_branch_numpy(pred):
        return pred.cpu().numpy() if pred.is_cuda else pred.numpy()  # kept


    def another_value(x, z):
        y = x.cpu() if x.is_cuda else z  # kept
        return y


    def negated_beside_a_flag(x, y):
        if y.ready and not x.is_cuda:  # kept
            x = x.cpu()
        return x


    def handed_to_a_method(self, x):
        if x.is_cuda:  # kept
            x = x.cpu()
        self.sink.save(x)


    def aliased(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        y = x
        return y.numpy()


    def read_in_a_loop(total, steps):
        for _ in range(steps):
            print(total.numpy())
            if total.is_cuda:  # kept
                total = total.cpu()
        return total


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


    def numpy_under_a_test(x, as_array):
        if x.is_cuda:  # kept
            x = x.cpu()
        if as_array:
            return x.numpy()
        return x


    def numpy_in_a_try(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        try:
            return x.numpy()
        except TypeError:
            return None


    def numpy_in_a_try_around(x):
        try:
            if x.is_cuda:  # kept
                x = x.cpu()
            return x.numpy()
        except TypeError:
            return None


    def latest_globally():
        global peak
        if peak.is_cuda:  # kept
            peak = peak.cpu()
        return peak


    def not_cuda_beside_a_flag(x):
        if x.requires_grad and not x.is_cuda:  # kept
            x = x.cpu()
        return x


    def dropped_move_of_an_object(tile):
        if tile.is_cuda:  # kept
            tile.cpu()
        return tile


    def moves_itself_for_its_tile(self):
        if self.analog_tile.is_cuda:  # kept
            self = self.cpu()
        return self


    def comprehension_of_its_own(x, rows):
        if x.is_cuda:  # kept
            x = x.cpu()
        return [x.numpy() for x in rows] + [x]


    def builds_on_its_device(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return torch.zeros(3, device=x.device)


    def numpy_in_the_other_branch(x, flag):
        if flag:
            if x.is_cuda:  # kept
                x = x.cpu()
            return x
        else:
            return x.numpy()


    def numpy_after_a_return(x, flag):
        if flag:
            if x.is_cuda:  # kept
                x = x.cpu()
            return x
        return x.numpy()


    def numpy_under_a_condition(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return x.numpy() if x.device.type == "cpu" else x


    def changed_in_place_later(x):
        y = x.cpu() if x.is_cuda else x  # kept
        x.add_(1)
        return y


    def bound_again_before_numpy(x, fresh):
        if x.is_cuda:  # kept
            x = x.cpu()
        if fresh:
            x = torch.zeros(3)
        return x.numpy()


    def only_its_shape_to_numpy(x):
        if x.is_cuda:  # kept
            x = x.cpu()
        return np.shape(x)
'''


def test_a_value_that_still_needs_the_host_keeps_the_finding(tmp_path: Path) -> None:
    kept = _write(tmp_path, "kept.py", _KEPT)
    kept_lines_stay(kept, "TP003")
    found = worst_by_line(tmp_path)
    lines = kept.read_text().splitlines()

    def at(function: str) -> tuple[str | None, str]:
        start = lines.index(next(text for text in lines if text.startswith(f"def {function}(")))
        test = next(n for n, text in enumerate(lines[start:], start + 1) if text.endswith("# kept"))
        return found[("kept.py", test, "TP003")]

    severity, reason = at("to_numpy")
    numpy_line = lines.index("    return x.clone().numpy()") + 1
    assert severity == "error" and f"line {numpy_line} then needs it on the host" in reason, (severity, reason)
    assert at("to_array")[0] == at("other_branch_numpy")[0] == "error"
    assert at("detached_to_numpy")[0] == at("numpy_without_grad")[0] == "error"
    # a mismatch, a conversion one step away, or nothing: the finding stays as it was
    for function in ("mixed", "added_in_place", "collected", "recorded", "into_an_array", "detached_on_cuda_only",
                     "kept_globally", "read_by_a_closure", "numpy_under_a_test", "numpy_in_a_try",
                     "numpy_in_a_try_around", "latest_globally", "dropped_move_of_an_object", "not_cuda_beside_a_flag",
                     "moves_itself_for_its_tile", "comprehension_of_its_own", "builds_on_its_device",
                     "numpy_in_the_other_branch", "numpy_after_a_return", "numpy_under_a_condition",
                     "changed_in_place_later",
                     "bound_again_before_numpy", "only_its_shape_to_numpy"):
        assert at(function)[0] == "silent", (function, at(function))


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
    assert moves.count([value, value]) == 6
    encoder = moves.Encoder(device="meta")
    with pytest.raises(RuntimeError, match="item"):  # a meta tensor has no numbers to read
        encoder.encode(value, [])
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        kept.to_numpy(value)
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        kept.other_branch_numpy(value)
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        kept.collected([value], lambda b: b)
    assert kept.numpy_in_a_try(value) is None
    assert kept.only_its_shape_to_numpy(value) == (3,)
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


    def reading_kept_globally():
        global peak
        if torch.cuda.is_available():  # kept
            torch.cuda.empty_cache()
            peak = torch.cuda.max_memory_allocated()
            logger.info("peak %d", peak)


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


    def shown_through_a_walrus():
        if torch.cuda.is_available():  # kept
            torch.cuda.empty_cache()
            used = torch.cuda.memory_allocated()
            logger.info("used %d", (stats_used := used))
        return stats_used


    def a_check_that_runs_something(subprocess):
        if torch.cuda.is_available():  # kept
            torch.cuda.empty_cache()
            subprocess.check_call(["nvidia-smi", "-pm", "1"])


    def reading_deleted_after():
        if torch.cuda.is_available():  # kept
            torch.cuda.empty_cache()
            used = torch.cuda.memory_allocated()
            logger.info("used %d", used)
        del used


    def a_global_nobody_binds():
        global never_bound
        if torch.cuda.is_available():  # kept
            never_bound = torch.cuda.memory_allocated()
        return never_bound


    def step_and_log(start, time):
        if torch.cuda.is_available():  # kept
            torch.cuda.synchronize()
            logger.info("took %.3f", time.perf_counter() - start)
        return time.perf_counter() - start
'''


def test_a_cuda_check_that_only_tunes_and_reports_memory_is_info(tmp_path: Path) -> None:
    """simpletuner's ``cleanup_memory``: empty the cache, read two figures, log them."""
    reports = _write(tmp_path, "reports.py", _REPORTS)
    check_marked_lines([tmp_path], (reports,))
    found = worst_by_line(tmp_path)
    _, reason = found[("reports.py", 9, "TP003")]
    assert reason.startswith("guards only CUDA tuning or bookkeeping"), reason
    lines = reports.read_text().splitlines()
    never_bound = lines.index("    global never_bound") + 2
    severity, reason = found[("reports.py", never_bound, "TP003")]
    assert severity == "error" and "never_bound" in reason, (severity, reason)  # the module binds no such name
