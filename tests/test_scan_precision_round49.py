"""Round 49 (docs/precision/round49.md): a flag parameter that every call fills from a CUDA query.
From the verdicts of seed 710376: dscript's ``predict_cmap_interaction(..., use_cuda)`` moves its
inputs with ``if use_cuda: z_a = z_a.cuda()``, and every call hands down ``use_cuda = (args.device >
-1) and torch.cuda.is_available()`` from ``train_model``, through ``interaction_grad`` (whose own
default is True) and ``interaction_eval``.  Beside it, the calls and bindings that may still turn
the flag on where CUDA is absent."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_HANDED_DOWN = '''
    import torch


    def predict_pair(model, x, use_cuda, add_first=True):
        if use_cuda:
            x = x.cuda()  # quiet
        return model(x)


    def predict(model, x, use_cuda):
        return predict_pair(model, x, use_cuda)


    def gradient_step(model, x, y, weight=0.5, use_cuda=True):
        if use_cuda:
            y = y.cuda()  # quiet
        loss = (predict_pair(model, x, use_cuda) - y).pow(2).mean() * weight
        loss.backward()
        return loss


    def evaluate(model, batches, use_cuda):
        scores = [predict(model, x, use_cuda) for x, _ in batches]
        if not use_cuda:
            return torch.stack(scores)
        return torch.stack([s.cuda() for s in scores])  # quiet


    def move(x, use_cuda):
        return x.cuda() if use_cuda else x  # quiet


    def train_model(args, model, batches):
        use_cuda = (args.device > -1) and torch.cuda.is_available()
        for x, y in batches:
            gradient_step(model, x, y, use_cuda=use_cuda)
        model = move(model, torch.cuda.device_count() > 1)
        return evaluate(model, batches, use_cuda)
'''


def test_a_flag_every_call_fills_from_a_cuda_query_is_info(tmp_path: Path) -> None:
    train = _write(tmp_path, "train.py", _HANDED_DOWN + '''

    def main(args, model, batches):
        torch.cuda.set_device(args.device)  # kept
        return train_model(args, model, batches)
    ''')
    check_marked_lines([tmp_path], (train,))
    _, reason = worst_by_line(tmp_path)[("train.py", 6, "TP002")]
    assert reason.startswith("`predict_pair` runs this line only when its `use_cuda` is true"), reason
    assert "through `predict`, `evaluate`, `gradient_step`" in reason and "train.py:34" in reason, reason


def _kept_beside_the_chain(tmp_path: Path, extra: str, name: str = "train.py") -> None:
    """The quiet chain, with one more call or binding that keeps the marked lines of ``extra``."""
    body = _HANDED_DOWN.replace("# quiet", "") + extra
    kept_lines_stay(_write(tmp_path, name, body), "TP002")


def test_a_call_that_leaves_the_default_on_keeps_it(tmp_path: Path) -> None:
    _kept_beside_the_chain(tmp_path, '''

    def gradient_step_on(model, x, y, use_cuda=True):
        if use_cuda:
            y = y.cuda()  # kept
        return y


    def run(model, x, y):
        gradient_step_on(model, x, y, use_cuda=torch.cuda.is_available())
        return gradient_step_on(model, x, y)
    ''')


def test_a_call_passing_an_option_or_a_constant_keeps_it(tmp_path: Path) -> None:
    # flags on by default (a default of True), so that only the calls decide
    kept_lines_stay(_write(tmp_path, "train.py", '''
        import torch


        def to_device(x, cuda=True):
            if cuda:
                x = x.cuda()  # kept
            return x


        def to_gpu(x, use_gpu=True):
            if use_gpu:
                x = x.cuda()  # kept
            return x


        def run(args, x):
            a = to_device(x, args.cuda)
            b = to_device(x, torch.cuda.is_available())
            return a, b, to_gpu(x, True), to_gpu(x, use_gpu=torch.cuda.is_available())
    '''), "TP002")


def test_bindings_that_may_be_on_without_cuda_keep_it(tmp_path: Path) -> None:
    # a function for each binding, called once with it: a query another accelerator answers too, a
    # name bound twice, in a block, at module level, after the call, a loop variable, bound again in
    # a block, bound only in a nested function; a flag the function changes itself; an `or` in the test
    kept_lines_stay(_write(tmp_path, "train.py", '''
        import torch

        USE_CUDA = torch.cuda.is_available()


        def to_device_mps(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_twice(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_block(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_module(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_after(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_loop(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_later(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_inner(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_forced(x, use_cuda=True, force=False):
            use_cuda = use_cuda or force
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def to_device_or(x, use_cuda=True, force=False):
            if use_cuda or force:
                x = x.cuda()  # kept
            return x


        def run(args, x):
            accelerated = torch.cuda.is_available() or torch.backends.mps.is_available()
            x = to_device_mps(x, accelerated)
            on = torch.cuda.is_available()
            on = on or args.force
            x = to_device_twice(x, on)
            if args.fast:
                fast = torch.cuda.is_available()
            else:
                fast = args.gpu
            x = to_device_block(x, fast)
            x = to_device_module(x, USE_CUDA)
            x = to_device_after(x, late)
            late = torch.cuda.is_available()
            for each in (torch.cuda.is_available(), True):
                x = to_device_loop(x, each)
            found = torch.cuda.is_available()
            if args.force:
                found = True
            x = to_device_later(x, found)

            def probe():
                USE_CUDA = torch.cuda.is_available()
                return USE_CUDA
            x = to_device_inner(x, USE_CUDA)
            x = to_device_forced(x, torch.cuda.is_available(), force=args.force)
            return to_device_or(x, torch.cuda.is_available(), args.force), late
    '''), "TP002")


def test_a_function_reached_another_way_keeps_it(tmp_path: Path) -> None:
    # handed on as a value, called with `*args`, named by another file, a method a base calls, a
    # call spelled in a string
    _write(tmp_path, "other.py", '''
        from helpers import imported

        def run(x):
            return imported(x, True)
    ''')
    kept_lines_stay(_write(tmp_path, "helpers.py", '''
        import torch


        def handed_on(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def unpacked(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def imported(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        class Net(torch.nn.Module):
            def forward(self, x, use_cuda=True):
                if use_cuda:
                    x = x.cuda()  # kept
                return x

            def check(self, x):
                return self.forward(x, torch.cuda.is_available())


        def by_name(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def run(x, options):
            eval("by_name(x, True)")
            by_name(x, torch.cuda.is_available())
            step = handed_on
            a = handed_on(x, torch.cuda.is_available())
            b = unpacked(*options)
            c = unpacked(x, torch.cuda.is_available())
            return step, a, b, c, imported(x, torch.cuda.is_available())
    '''), "TP002")


def test_a_method_every_call_fills_from_a_query_is_info(tmp_path: Path) -> None:
    module = _write(tmp_path, "model.py", '''
        import torch


        class Embedder:
            def _load(self, x, on_gpu):
                if on_gpu:
                    return x.cuda()  # quiet
                return x

            def embed(self, x):
                gpu = torch.cuda.is_available()
                return self._load(x, gpu)

            @staticmethod
            def pin(x, use_cuda):
                return x.pin_memory().cuda() if use_cuda else x  # quiet


        def run(x):
            return Embedder.pin(x, use_cuda=torch.cuda.is_available())


        def place(x):
            torch.cuda.set_device(0)  # kept
            return x
    ''')
    check_marked_lines([tmp_path], (module,))


def test_a_file_scanned_alone_keeps_it(tmp_path: Path) -> None:
    # scanning one file of a package cannot see the package's other callers
    package = tmp_path / "pkg"
    train = _write(package, "train.py", _HANDED_DOWN)
    _write(package, "__init__.py", "")
    serious = {line for (name, line, _), (severity, _) in worst_by_line(train).items()
               if name == "train.py" and severity in ("error", "silent")}
    assert 6 in serious, sorted(serious)


def test_a_skip_that_another_accelerator_lifts_keeps_the_test(tmp_path: Path) -> None:
    # `not (cuda or mps)` is false on a Mac, where the test then runs: every part must ask for CUDA
    tests = _write(tmp_path, "test_devices.py", '''
        import pytest
        import torch


        @pytest.mark.skipif(not (torch.cuda.is_available() or torch.backends.mps.is_available()), reason="GPU")
        def test_either():
            torch.cuda.synchronize()  # kept


        @pytest.mark.skipif(not (torch.cuda.is_available() or torch.cuda.device_count() > 0), reason="CUDA")
        def test_cuda():
            torch.cuda.synchronize()  # quiet
    ''')
    check_marked_lines([tmp_path], (tests,))


def test_what_its_review_found_keeps_the_finding(tmp_path: Path) -> None:
    # a method a base calls under another name, in the chain too (`forward`, nn.Module's `train`);
    # the flag rebound by `except ... as`, a `match` capture or an import; a positional-only flag
    # beside `**options`; a method called on its class with `self` among the arguments; an assert;
    # the flag in the test of a one-line `if` that holds the finding; the caller's name rebound by
    # `match` or an import; a module-level test of the same name above the function
    _write(tmp_path, "settings.py", "FORCE = True\n")
    kept_lines_stay(_write(tmp_path, "main.py", '''
        import torch
        from torch import nn


        def _move(x, use_cuda):
            if use_cuda:
                return x.cuda()  # kept
            return x


        class Net(nn.Module):
            def forward(self, x, use_cuda=True):
                return _move(x, use_cuda)

            def check(self, x):
                return self.forward(x, torch.cuda.is_available())


        class Block(nn.Module):
            def train(self, mode=True):
                if mode:
                    torch.cuda.reset_peak_memory_stats()  # kept
                return super().train(mode)

            def warm_up(self):
                return self.train(torch.cuda.is_available())


        def _caught(x, shape, use_cuda=True):
            try:
                x = x.view(shape)
            except RuntimeError as use_cuda:
                if use_cuda:
                    return x.cuda()  # kept
                raise
            return x


        def _matched(x, options, use_cuda=True):
            match options:
                case {"cuda": use_cuda}:
                    pass
            if use_cuda:
                return x.cuda()  # kept
            return x


        def _imported(x, use_cuda=True, from_settings=False):
            if from_settings:
                from settings import FORCE as use_cuda
            if use_cuda:
                return x.cuda()  # kept
            return x


        def _positional(x, use_cuda=True, /, **options):
            if use_cuda:
                x = x.cuda()  # kept
            return x.to(**options)


        class Loader:
            def _load(self, pin, on_gpu, x):
                if on_gpu:
                    x = x.cuda()  # kept
                return x


        class Sub(Loader):
            def load(self, x):
                return Loader._load(self, torch.cuda.is_available(), True, x)


        def _asserted(x, use_cuda=True):
            assert use_cuda, "this path needs CUDA"
            return x.cuda()  # kept


        def _dtype(use_bf16=True):
            dtype = torch.float32
            if torch.cuda.get_device_capability()[0] >= 8 and use_bf16: dtype = torch.bfloat16  # kept
            return dtype


        def _placed(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        def _placed_too(x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # kept
            return x


        use_cuda = torch.cuda.is_available() or torch.backends.mps.is_available()
        if use_cuda:
            def _defined_under(x, use_cuda=True):
                return x.cuda()  # kept


        def main(x, opts):
            _defined_under(x, torch.cuda.is_available())
            _caught(x, (3,), torch.cuda.is_available())
            _matched(x, opts, torch.cuda.is_available())
            _imported(x, torch.cuda.is_available(), from_settings=True)
            _positional(x, True, use_cuda=torch.cuda.is_available())
            _asserted(x, torch.cuda.is_available())
            _dtype(torch.cuda.is_available())
            ok = torch.cuda.is_available()
            match opts:
                case [ok]:
                    pass
            fine = torch.cuda.is_available()
            from os import sep as fine
            return _placed(x, ok), _placed_too(x, fine)
    '''))


def test_an_unused_default_that_turns_the_flag_on_is_named(tmp_path: Path) -> None:
    # the issue asks for "default only" where every call passes the parameter; the reason says so
    module = _write(tmp_path, "ops.py", '''
        import torch


        def embed(model, x, use_cuda=True):
            if use_cuda:
                x = x.cuda()  # quiet
            return model(x)


        def embed_all(model, xs):
            torch.cuda.synchronize()  # kept
            return [embed(model, x, torch.cuda.is_available()) for x in xs]
    ''')
    check_marked_lines([tmp_path], (module,))
    _, reason = worst_by_line(tmp_path)[("ops.py", 6, "TP002")]
    assert reason.endswith("the default of the flag in `embed`, which turns it on, is never used (default only)"), reason
