"""A module that reports the environment, and a project's wrapper of the CUDA availability query.
Shapes from the thirty-fourth judge's verdicts (seed 700555): pypose's copy of collect_env, pypots'
`env` command, and fairseq2's device detector, each judged incorrect at error or silent."""
from __future__ import annotations

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

from torchport.scan.config import ScanConfig
from torchport.scan.scanner import scan

_REPORT = """
    import subprocess

    import torch


    def get_nvidia_smi():
        return subprocess.run(["nvidia-smi"], capture_output=True).stdout  # quiet


    def get_env_info():
        return {"cuda": torch.cuda.is_available(),  # quiet
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
"""

# A module named env.py outside a CLI is often where a package sets its device.
_CONFIG = """
    import torch

    DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # kept
"""

_WRAPPED_QUERY = """
    import torch


    class DeviceDetector:
        def __init__(self, cuda_context, cudnn):
            self._cuda_context = cuda_context
            self._cudnn = cudnn

        def default_cuda_device(self):
            if not self._cuda_context.is_available():
                return None
            return torch.device("cuda", 0)  # quiet

        def default_device(self):
            if self._cudnn.is_available():  # cuDNN's, not CUDA's
                return torch.device("cuda", 0)  # kept
            return torch.device("cpu")
"""


def test_a_module_that_reports_the_environment_and_a_wrapped_cuda_query(tmp_path):
    collect_env = _write(tmp_path, "pkg/utils/collect_env.py", _REPORT)
    command = _write(tmp_path, "pkg/commands/env.py", _REPORT)
    config = _write(tmp_path, "pkg/utils/env.py", _CONFIG)
    detector = _write(tmp_path, "pkg/device.py", _WRAPPED_QUERY)
    paths = (collect_env, command, config, detector)
    check_marked_lines([tmp_path / "pkg"], paths)


# From the thirty-sixth judge's verdicts (seed 976340): torchkge's `use_cuda` modes, which default to
# None, and mushroom-rl's `self._use_cuda`, a constructor argument.
_FLAG_MODES = """
    class TrainDataLoader:
        def __init__(self, kg, batch_size, use_cuda=None):
            self.use_cuda = use_cuda
            if use_cuda is not None and use_cuda == "all":
                self.h = kg.head_idx.cuda()  # quiet

        def batch(self, b):
            if self.use_cuda in ["all", "batch"]:
                return b.cuda()  # quiet
            return b


    class Trainer:
        def __init__(self, loader):
            self.use_cuda = loader.use_cuda  # the loader's flag, handed on

        def step(self, model):
            if self.use_cuda == "batch":
                model.cuda()  # quiet


    class NoisyLinear:
        def __init__(self, features, use_cuda):
            self._use_cuda = use_cuda

        def forward(self, eps):
            if self._use_cuda:
                eps = eps.cuda()  # quiet
            return eps


    def main(x, cuda=0):
        cuda = bool(cuda)  # rebinding the parameter from itself keeps it off by default
        if cuda:
            x = x.cuda()  # quiet
        return x
"""

# The same modes turned on: by a default, and by a config read elsewhere.
_FLAG_MODES_ON = """
    class Loader:
        def __init__(self, kg, use_cuda="all"):
            if use_cuda == "all":
                self.h = kg.head_idx.cuda()  # kept


    class Runner:
        def __init__(self, args, use_cuda=None):
            self.use_cuda = args.use_cuda

        def step(self, model):
            if self.use_cuda == "batch":
                model.cuda()  # kept
"""


def test_modes_of_a_cuda_flag_and_a_flag_handed_on(tmp_path):
    modes = _write(tmp_path, "modes.py", _FLAG_MODES)
    modes_on = _write(tmp_path, "modes_on.py", _FLAG_MODES_ON)
    check_marked_lines([modes, modes_on], (modes, modes_on))


# Shapes an independent review of round 31 found lowered although CUDA is reached by default:
# each file on its own, since whether a flag is ever on is read over one whole file.
_FLAG_ON_ELSEWHERE = {
    # a settings object under any name, not one of this file's classes
    "settings.py": """
        class Trainer:
            def __init__(self, model, parsed):
                self.use_cuda = parsed.use_cuda

            def step(self, x):
                if self.use_cuda:
                    x = x.cuda()  # kept
                return x


        def evaluate(model, x, use_cuda=False):
            return model(x)
    """,
    "nested_settings.py": """
        class Trainer:
            def __init__(self, loader, use_cuda=None):
                self.use_cuda = self.hparams.loader.use_cuda

            def step(self, x):
                if self.use_cuda == "all":
                    x = x.cuda()  # kept
                return x
    """,
    # a class turned on by a positional argument, its flag handed on
    "positional.py": """
        class Loader:
            def __init__(self, data, use_cuda=False):
                self.use_cuda = use_cuda


        class Worker:
            def __init__(self, loader):
                self.use_cuda = loader.use_cuda

            def run(self, x):
                if self.use_cuda and x is not None:
                    x = x.cuda()  # kept
                return x


        def build(data):
            return Worker(Loader(data, True))
    """,
    # a private flag stored from a parameter a caller turns on
    "private.py": """
        class Agent:
            def __init__(self, net, use_cuda):
                self.net = net
                self._use_cuda = use_cuda

            def act(self, x):
                if self._use_cuda:
                    x = x.cuda()  # kept
                return self.net(x)


        def main(net):
            return Agent(net, use_cuda=True).act(1)
    """,
    "constant.py": """
        USE_CUDA = True


        class Agent:
            def __init__(self):
                self._use_cuda = USE_CUDA

            def act(self, x):
                if self._use_cuda:
                    x = x.cuda()  # kept
                return x
    """,
    "lambda_default.py": """
        class Model:
            def __init__(self, x, use_cuda):
                self._use_cuda = use_cuda
                if self._use_cuda:
                    x.cuda()  # kept


        make = lambda x, use_cuda=True: Model(x, use_cuda=use_cuda)
    """,
    "tuple_store.py": """
        class M:
            def __init__(self, n):
                self.use_cuda, self.n = True, n

            def f(self, x):
                if self.use_cuda and self.n:
                    x = x.cuda()  # kept
                return x
    """,
    "rebound.py": """
        DEFAULT_MODE = "all"


        def f(x, use_cuda=None):
            if use_cuda is None:
                use_cuda = DEFAULT_MODE
            if use_cuda == "all":
                x = x.cuda()  # kept
            return x


        def g(x, use_cuda=None):
            if use_cuda is None:
                use_cuda = DEFAULT_MODE
            if use_cuda:
                x = x.cuda()  # kept
            return x
    """,
    # on on a Mac: the flag asks for MPS too
    "mps_too.py": """
        import torch

        use_cuda = torch.cuda.is_available() or torch.backends.mps.is_available()


        def f(x, y):
            if use_cuda and y:
                x = x.cuda()  # kept
            return x
    """,
}


def test_a_flag_turned_on_elsewhere_keeps_what_it_guards(tmp_path):
    modes = _write(tmp_path, "modes.py", _FLAG_MODES)
    kept = [_write(tmp_path, name, text) for name, text in _FLAG_ON_ELSEWHERE.items()]
    check_marked_lines([modes, *kept], (modes, *kept))


def test_the_note_quotes_the_test_the_user_reads(tmp_path):
    modes = _write(tmp_path, "modes.py", _FLAG_MODES)
    notes = {f.line: f.cap_reason for f in scan([modes], ScanConfig(), jobs=1).findings}
    assert any("`if self.use_cuda in ['all', 'batch']:`" in note for note in notes.values()), notes
    assert any("`if self._use_cuda:`" in note for note in notes.values()), notes
