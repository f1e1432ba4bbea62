"""CUDA-only third-party packages, by import name and by distribution name."""
from __future__ import annotations

import re
import sys

from torchport.scan.rules import CUDA_ONLY_PACKAGE, TRITON_KERNEL

# Import names that mean the library, whatever file of that name a project holds: the standard
# library's and those installed beside any PyTorch program.
LIBRARY_NAMES = frozenset(sys.stdlib_module_names) | {
    "__future__", "torch", "numpy", "scipy", "PIL", "cv2", "sklearn", "pandas", "transformers", "torchvision",
    "torchaudio", "triton", "tensorflow", "jax", "yaml", "tqdm", "einops"}

RULE_IDS = (CUDA_ONLY_PACKAGE, TRITON_KERNEL)

_SDPA = ("torch.nn.functional.scaled_dot_product_attention (layout (batch, heads, seq, dim), "
         "flash_attn uses (batch, seq, heads, dim)) or flex_attention (2.5)")

# import name -> what to use instead
CUDA_ONLY_IMPORTS: dict[str, str] = {
    "apex": "torch.amp, torch.optim.AdamW(fused=True) (not on xla), nn.LayerNorm / "
            "nn.RMSNorm (2.4), torch DistributedDataParallel",
    "flash_attn": _SDPA,
    "flash_attn_interface": _SDPA,
    "xformers": _SDPA,
    "cupy": "torch tensor ops (or numpy on the host)",
    "cupyx": "torch tensor ops (or scipy on the host)",
    "pycuda": "torch.library.custom_op with a per-target kernel",
    "pynvml": "torch.accelerator.memory_* and the target's own monitoring",
    "nvidia": "the target's equivalent library (nvidia.dali: torch DataLoader, ...)",
    "transformer_engine": "torch.amp; float8 training via torchao",
    "tensorrt": "torch.compile / torch.export with the target's backend",
    "torch_tensorrt": "torch.compile / torch.export with the target's backend",
    "mamba_ssm": "a pure-PyTorch selective scan (or the target's kernel)",
    "causal_conv1d": "nn.Conv1d with left padding",
    "cuda": "torch.accelerator (cuda-python talks to the NVIDIA driver)",
}
# Not listed, though once CUDA-only: bitsandbytes (>= 0.45 has CPU, XPU, MPS, HPU and
# ROCm backends and imports everywhere).
# Modules inside an otherwise portable package that build CUDA kernels.
CUDA_ONLY_SUBMODULES: dict[str, str] = {
    "deepspeed.ops": "DeepSpeed's accelerator abstraction "
                     "(deepspeed.accelerator.get_accelerator()) or FSDP2",
    "deepspeed.op_builder": "DeepSpeed's accelerator abstraction or FSDP2",
}

# Normalised distribution names (PEP 503) -> (rule id, replacement).
_DISTRIBUTIONS: dict[str, str] = {
    "apex": "apex", "flash-attn": "flash_attn", "flash-attention": "flash_attn",
    "xformers": "xformers", "pycuda": "pycuda",
    "pynvml": "pynvml", "nvidia-ml-py": "pynvml", "nvidia-ml-py3": "pynvml",
    "torch-tensorrt": "torch_tensorrt", "tensorrt": "tensorrt", "mamba-ssm": "mamba_ssm",
    "causal-conv1d": "causal_conv1d", "cuda-python": "cuda",
}
_DISTRIBUTION_PREFIXES = (("cupy", "cupy"), ("nvidia-", "nvidia"),
                          ("transformer-engine", "transformer_engine"), ("tensorrt-", "tensorrt"))

_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_CUDA_TORCH_BUILD = re.compile(r"^\s*(torch|torchvision|torchaudio)\b[^#;]*\+cu\d+", re.I)
_CUDA_INDEX_URL = re.compile(r"download\.pytorch\.org/whl/cu\d+|/whl/nightly/cu\d+", re.I)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def classify_requirement(line: str) -> tuple[str, str, str] | None:
    """For one requirement specifier (a requirements.txt line, a pyproject dependency
    string), return (rule id, package, replacement) when it pulls in CUDA-only code."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    if _CUDA_INDEX_URL.search(text):
        return (CUDA_ONLY_PACKAGE, "CUDA wheel index", "the target's torch build (CPU, ROCm, XPU wheels "
                "have their own index; TorchTPU and TorchNeuron install on the default torch)")
    if _CUDA_TORCH_BUILD.match(text):
        return (CUDA_ONLY_PACKAGE, "torch CUDA build", "an unpinned local version (no +cuXXX)")
    if text.startswith("-"):
        return None
    match = _REQUIREMENT_NAME.match(text)
    if not match:
        return None
    name = normalise(match.group(1))
    if name == "triton":
        return (TRITON_KERNEL, "triton", "torch.library.triton_op with an eager fallback")
    module = _DISTRIBUTIONS.get(name)
    if module is None:
        module = next((m for prefix, m in _DISTRIBUTION_PREFIXES if name.startswith(prefix)), None)
    if module is None:
        return None
    return (CUDA_ONLY_PACKAGE, match.group(1), CUDA_ONLY_IMPORTS[module])


def classify_import(module: str) -> tuple[str, str] | None:
    """(package, replacement) for an imported module that is CUDA-only."""
    for prefix, replacement in CUDA_ONLY_SUBMODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return prefix, replacement
    top = module.split(".", 1)[0]
    if top in CUDA_ONLY_IMPORTS:
        return top, CUDA_ONLY_IMPORTS[top]
    return None
