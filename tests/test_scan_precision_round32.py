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

# Shapes an independent review of round 32 found lowered although the import stops the package.
_STOPS = {
    "exits.py": """
        import sys

        try:
            import factor_multiply  # kept
        except ImportError as e:
            print("factor_multiply is not built: run python setup.py install", e)
            sys.exit(1)
    """,
    "first_handler.py": """
        import warnings

        try:
            import factor_multiply  # kept
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError("build it: python setup.py build_ext --inplace") from e
        except ImportError:
            warnings.warn("factor_multiply failed to load")
            factor_multiply = None
    """,
    "nested.py": """
        try:
            try:
                import factor_multiply  # kept
            except ImportError:
                raise RuntimeError("factor_multiply is required")
            import numpy as np
        except ImportError:
            np = None
    """,
    "in_a_function.py": """
        try:
            import numpy as np

            def op(x):
                import factor_multiply  # kept
                return factor_multiply.forward(x)
        except ImportError:
            np = None
    """,
    "never_consulted.py": """
        try:
            from factor_multiply import fused_op  # kept
        except ImportError:
            HAS_EXT = False


        def forward(x):
            return fused_op(x)
    """,
    "asserted.py": """
        try:
            import factor_multiply  # kept
        except ImportError:
            factor_multiply = None

        assert factor_multiply is not None, "build factor_multiply first"
    """,
}

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

# Models that call parallelize() themselves, or turn the flag on other ways.
_PARALLEL_ON = {
    "called_in_init.py": """
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.model_parallel = False
                self.parallelize()

            def parallelize(self, device_map=None):
                self.model_parallel = True
                self.first_device = "cuda:0"  # kept
    """,
    "from_pretrained.py": """
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.model_parallel = False

            @classmethod
            def from_pretrained(cls, config):
                model = cls(config)
                model.parallelize()
                return model

            def parallelize(self, device_map=None):
                self.model_parallel = True
                self.to("cuda:0")  # kept

            def forward(self, x):
                if self.model_parallel:
                    torch.cuda.set_device(x.device)  # kept
                return x
    """,
    "class_attribute.py": """
        import torch
        from torch import nn


        class Net(nn.Module):
            model_parallel = True

            def parallelize(self, device_map=None):
                self.model_parallel = True

            def forward(self, x):
                if self.model_parallel:
                    torch.cuda.set_device(x.device)  # kept
                return x
    """,
    "annotated.py": """
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.model_parallel: bool = True

            def parallelize(self, device_map=None):
                self.model_parallel = True

            def forward(self, x):
                if self.model_parallel:
                    torch.cuda.set_device(x.device)  # kept
                return x
    """,
}

# A module that no current torch has: the handler runs on a current torch.
_GONE_MODULE = """
    import torch

    try:
        from torch._six import inf
    except ImportError:
        inf = float("inf")
        device = torch.device("cuda")  # kept
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


def test_an_import_the_package_does_not_survive_stays(tmp_path):
    _write(tmp_path, "setup.py", _SETUP)
    optional = _write(tmp_path, "butterfly.py", _OPTIONAL)
    stops = [_write(tmp_path, name, text) for name, text in _STOPS.items()]
    check_marked_lines([tmp_path], (optional, *stops))


def test_parallelism_turned_on_by_the_model_and_a_gone_torch_module_stay(tmp_path):
    gpt2 = _write(tmp_path, "gpt2.py", _PARALLELIZE)
    kept = [_write(tmp_path, name, text) for name, text in _PARALLEL_ON.items()]
    check_marked_lines([gpt2, *kept, _write(tmp_path, "gone.py", _GONE_MODULE)],
                       (gpt2, *kept, tmp_path / "gone.py"))


def test_opt_in_model_parallelism_and_old_torch_fallbacks(tmp_path):
    paths = (_write(tmp_path, "gpt2.py", _PARALLELIZE), _write(tmp_path, "model.py", _PARALLEL_BY_DEFAULT),
             _write(tmp_path, "precision.py", _OLD_TORCH))
    check_marked_lines(list(paths), paths)
