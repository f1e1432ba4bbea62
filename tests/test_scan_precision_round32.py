"""An optional import of the project's CUDA extension, Hugging Face's opt-in model parallelism,
and a fallback for a torch without the device-generic API.  Shapes from the thirty-eighth
judge's verdicts (seed 49420): neuromancer's butterfly kernels, the GPT-2 copies in archai and
fastNLP, and torchtnt's GradScaler, each judged incorrect at error or silent by both judges."""
from __future__ import annotations

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_SETUP = """
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    setup(name="butterfly", ext_modules=[CUDAExtension("factor_multiply", ["factor_multiply_cuda.cu"])],
          cmdclass={"build_ext": BuildExtension})
"""

_OPTIONAL = """
    use_extension = True
    try:
        from factor_multiply import butterfly_multiply_intermediate  # quiet
    except:
        use_extension = False


    def multiply(x):
        if use_extension:
            return butterfly_multiply_intermediate(x)
        return x * 2
"""

# Without a fallback the import stops the package where the extension is not built.
_REQUIRED = """
    from factor_multiply import butterfly_multiply_intermediate  # kept

    try:
        from factor_multiply import butterfly_factor_multiply  # kept
    except ImportError:
        raise ImportError("build the extension first: python setup.py install")

    try:
        from factor_multiply import butterfly_multiply_untied  # kept
    except ImportError:
        pass
"""

_PARALLELIZE = """
    import torch
    from torch import nn


    class GPT2Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.model_parallel = False
            self.device_map = None
            self.h = nn.ModuleList([nn.Linear(2, 2) for _ in range(4)])

        def parallelize(self, device_map=None):
            self.device_map = device_map
            self.model_parallel = True
            for k, blocks in self.device_map.items():
                for block in blocks:
                    self.h[block] = self.h[block].to("cuda:" + str(k))  # quiet

        def deparallelize(self):
            self.model_parallel = False
            torch.cuda.empty_cache()

        def forward(self, hidden_states):
            for i, block in enumerate(self.h):
                if self.model_parallel:
                    torch.cuda.set_device(hidden_states.device)  # quiet
                hidden_states = block(hidden_states)
            return hidden_states
"""

# A model that turns model parallelism on by itself is not asking the user.
_PARALLEL_BY_DEFAULT = """
    import torch
    from torch import nn


    class Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.model_parallel = config.n_devices > 1

        def parallelize(self, device_map=None):
            self.model_parallel = True

        def forward(self, x):
            if self.model_parallel:
                torch.cuda.set_device(x.device)  # kept
            return x
"""

_OLD_TORCH = """
    from torch.cuda.amp.grad_scaler import GradScaler as CudaGradScaler

    try:
        from torch.amp.grad_scaler import GradScaler
    except Exception:
        GradScaler = CudaGradScaler  # quiet

    try:
        import apex
    except ImportError:
        Scaler = CudaGradScaler  # kept
"""


def test_optional_extension_imports(tmp_path):
    _write(tmp_path, "setup.py", _SETUP)
    optional = _write(tmp_path, "butterfly.py", _OPTIONAL)
    required = _write(tmp_path, "kernels.py", _REQUIRED)
    check_marked_lines([tmp_path], (optional, required))


def test_opt_in_model_parallelism_and_old_torch_fallbacks(tmp_path):
    paths = (_write(tmp_path, "gpt2.py", _PARALLELIZE), _write(tmp_path, "model.py", _PARALLEL_BY_DEFAULT),
             _write(tmp_path, "precision.py", _OLD_TORCH))
    check_marked_lines(list(paths), paths)
