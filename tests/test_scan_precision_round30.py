"""A module that reports the environment, and a project's wrapper of the CUDA availability query.
Shapes from the thirty-fourth judge's verdicts (seed 700555): pypose's copy of collect_env, pypots'
`env` command, and fairseq2's device detector, each judged incorrect at error or silent."""
from __future__ import annotations

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

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
