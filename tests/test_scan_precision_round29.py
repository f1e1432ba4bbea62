"""CUDA flags tested in an ``if`` statement, an availability probe that logs, isinstance tests
against CUDA tensor types, ``torch.cuda.random`` seeding, checks whose value is only shown or only
pins memory, a check compared with ``is False``, and a Qt event's ``.double()``.  Shapes from the
thirty-second judge's verdicts (seed 802241): trankit, cellpose, torchattacks, careamics, airllm,
grad-cam and carvekit, each judged incorrect at error or silent; the lines marked kept are an
independent review's counter-examples."""
from __future__ import annotations

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

_FLAGS = """
    import torch


    def unpack_batch(batch, use_cuda):
        if use_cuda:
            inputs = [b.cuda() for b in batch]  # quiet
        else:
            inputs = list(batch)
        return inputs


    def set_cuda(var, cuda):
        if cuda:
            return var.cuda()  # quiet
        return var


    class Seq:
        def __init__(self, use_cuda):
            self.use_cuda = use_cuda

        def zero_state(self, h0):
            if self.use_cuda:
                return h0.cuda()  # quiet
            return h0


    def prepare(x, cfg, use_gpu):
        if cfg.use_cuda:  # a config's default is in another file
            x = x.cuda()  # kept
        if use_gpu:  # asks for any GPU, and gets only CUDA
            x = x.to("cuda")  # kept
        return x
"""

# The same shapes where the file turns the flag on by default: the default path reaches CUDA.
_FLAGS_ON = """
    import argparse

    import torch


    def move(x, gpu=True):
        if gpu:
            x = x.cuda()  # kept
        return x


    class Runner:
        def __init__(self, config):
            self.use_cuda = config.use_cuda

        def step(self, x):
            if self.use_cuda:
                return x.cuda()  # kept
            return x


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_false")
        args = parser.parse_args()
        if args.cuda:
            torch.ones(2).cuda()  # kept
"""


# Each file turns its flag on in one more way a caller or a default can (an independent review's
# reproducers): the flag's body stays reported.
_TURNED_ON = {
    "positional.py": """
        import torch


        def train(model, loader, use_cuda):
            if use_cuda:
                model.cuda()  # kept


        def main(model, loader):
            train(model, loader, True)
    """,
    "alias.py": """
        class Embedder:
            def __init__(self, gpu=True):
                self.use_cuda = gpu

            def embed(self, x):
                if self.use_cuda:
                    x = x.cuda()  # kept
                return x
    """,
    "constant.py": """
        USE_GPU = True


        def embed(x, use_cuda=USE_GPU):
            if use_cuda:
                x = x.cuda()  # kept
            return x
    """,
    "loop.py": """
        def check_all(model, x):
            for use_cuda in (False, True):
                if use_cuda:
                    x = x.cuda()  # kept
                model(x)
    """,
    "test_parametrized.py": """
        import pytest


        @pytest.mark.parametrize("use_cuda", [False, True])
        def test_step(model, x, use_cuda):
            if use_cuda:
                x = x.cuda()  # kept
            model(x)
    """,
    "cli.py": """
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")


        def step(x, cuda):
            if cuda:
                x = x.cuda()  # kept
            return x


        def main(x):
            return step(x, cuda=True)
    """,
}


def test_an_if_on_a_cuda_flag_is_quiet_unless_the_file_turns_it_on(tmp_path):
    off = _write(tmp_path, "flags.py", _FLAGS)
    on = _write(tmp_path, "flags_on.py", _FLAGS_ON)
    check_marked_lines([off, on], (off, on))


def test_each_way_a_file_turns_a_cuda_flag_on_keeps_its_body_reported(tmp_path):
    for name, source in _TURNED_ON.items():
        path = _write(tmp_path / name.removesuffix(".py"), name, source)
        found = worst_by_line(path.parent)
        kept = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.endswith("# kept")]
        assert [found[(name, n, "TP002")][0] for n in kept] == ["error"] * len(kept), name


_PROBES = """
    import logging

    import onnxruntime as ort
    import torch

    log = logging.getLogger(__name__)


    def use_gpu(gpu_number=0):
        try:
            device = torch.device("cuda:" + str(gpu_number))  # quiet
            _ = torch.zeros((1, 1)).to(device)
            log.info("CUDA installed and working")
            return True
        except Exception:
            pass
        return False


    def load(model):
        try:
            model = model.to("cuda")  # kept
            log.info("moved")
            model.train()
            model.compile()
            return model
        except Exception:
            return None


    def validate(value):
        if torch.cuda.is_available() is False and "cuda" in value:  # quiet
            raise ValueError("GPU is not available, but specified as processing device!")
        return value


    def report():
        cuda_available = torch.cuda.is_available()  # quiet
        log.info(f"PyTorch {torch.__version__} (cuda available: {cuda_available})")


    def provider_for(path):
        use_gpu = torch.cuda.is_available()  # kept
        provider = f"{'CUDA' if use_gpu else 'CPU'}ExecutionProvider"
        return ort.InferenceSession(path, providers=[provider])


    def note():
        try:  # only a log line: nothing is probed (this crashed the first version)
            log.info("starting")
        except Exception:
            pass


    def resume(model, path):
        try:
            model.load_state_dict(torch.load(path, map_location="cuda:0"))  # kept
            log.info("resumed from %s", path)
        except Exception:
            pass


    def pick():
        cuda_available = torch.cuda.is_available()  # kept
        device = "cuda" if cuda_available else "cpu"
        return torch.ones(2, device=device)


    def loader_options(options):
        if "pin_memory" not in options:
            options["pin_memory"] = torch.cuda.is_available()  # quiet
        return options


    class Streamer:
        def load(self, state_dict):
            if self.prefetching and torch.cuda.is_available():  # quiet
                total = sum(v.numel() * v.element_size() for v in state_dict.values())
                if total <= self.budget:
                    try:
                        for k in state_dict.keys():
                            state_dict[k] = state_dict[k].pin_memory()
                    except RuntimeError:
                        pass
            return state_dict

        def stage(self, state_dict):
            if torch.cuda.is_available():  # kept
                for k in state_dict.keys():
                    state_dict[k] = state_dict[k].pin_memory().to("cuda")
            return state_dict


    def prepare(batch):
        device = "cpu"
        if torch.cuda.is_available():  # kept
            device = "cuda:0"
            batch = batch.pin_memory()
        return batch.to(device)
"""


_ELSE_EXITS = """
    import torch


    def test_memory_in_loop(model):
        if torch.cuda.is_available():  # quiet
            device = "cuda"
        else:
            print("CUDA not available")
            return
        model.to(device)
        initial = torch.cuda.memory_allocated()  # quiet
        assert torch.cuda.memory_allocated() <= initial * 1.5


    def test_memory_on_any_device(model):
        if not torch.cuda.is_available():  # quiet
            return
        assert torch.cuda.memory_allocated() >= 0  # quiet


    def bench(model):
        if torch.cuda.is_available():
            device = "cuda"
        elif torch.backends.mps.is_available():
            device = "mps"
        else:
            return None
        model.to(device)
        torch.cuda.synchronize()  # kept
"""


def test_probes_validators_reports_and_pinning_that_choose_no_device(tmp_path):
    probes = _write(tmp_path, "probes.py", _PROBES)
    check_marked_lines([probes], (probes,))


# A library function named `test` is an evaluation, not a test: returning where CUDA is absent
# makes it silently do nothing.
_EVALUATION = """
    import torch


    def test(model, loader):
        if not torch.cuda.is_available():  # kept
            return
        for batch in loader:
            model(batch.cuda())
"""


def test_code_past_an_else_that_leaves_where_cuda_is_absent(tmp_path):
    tests = _write(tmp_path, "tests/test_memory.py", _ELSE_EXITS)
    evaluation = _write(tmp_path, "lib/evaluate.py", _EVALUATION)
    check_marked_lines([tests, evaluation], (tests, evaluation))


_TYPES_AND_SEEDS = """
    import torch
    from qtpy import QtCore


    def to_int(inputs):
        if isinstance(inputs, torch.FloatTensor) or isinstance(inputs, torch.cuda.FloatTensor):
            return (inputs * 255).type(torch.uint8)
        return inputs


    def indices(n):
        return torch.cuda.LongTensor(n)


    def seeded(seed):
        torch.random.manual_seed(seed)
        torch.cuda.random.manual_seed(seed)


    def seeded_on_cuda_only(seed):
        torch.cuda.random.manual_seed_all(seed)


    def needs_cuda(x):
        assert isinstance(x, torch.cuda.FloatTensor), "expects a CUDA tensor"


    def wants_cuda(x):
        if not isinstance(x, (torch.cuda.FloatTensor, torch.cuda.HalfTensor)):
            raise TypeError("input must be a CUDA float tensor")


    class Canvas:
        def mouseClickEvent(self, ev):
            if ev.button() == QtCore.Qt.LeftButton and not ev.double():
                self.draw(ev)

        def forward(self, x):
            return x.double()
"""


def test_tensor_type_tests_cuda_random_seeding_and_qt_events(tmp_path):
    _write(tmp_path, "types.py", _TYPES_AND_SEEDS)
    found = worst_by_line(tmp_path)
    # an isinstance test raises nowhere; an accelerator's tensor just fails it: silent, not error
    assert found[("types.py", 6, "TP006")][0] == "silent"
    assert found[("types.py", 12, "TP006")][0] == "error"  # a CUDA tensor is made
    # torch.cuda.random.manual_seed is torch.cuda.manual_seed: seeding, never an error
    assert ("types.py", 17, "TP110") not in found
    assert found[("types.py", 17, "TP102")][0] == "info"  # torch.manual_seed just above seeds every device
    assert found[("types.py", 21, "TP102")][0] == "silent"
    # where the test fails the code raises: an error, as before
    assert found[("types.py", 25, "TP006")][0] == "error"
    assert found[("types.py", 29, "TP006")][0] == "error"
    assert found[("types.py", 35, "TP701")][0] == "info"  # a Qt event's double click
    assert found[("types.py", 39, "TP701")][0] == "error"
