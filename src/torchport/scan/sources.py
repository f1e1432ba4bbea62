"""Public documentation behind each lock-in pattern a rule cites (``Rule.sources``
holds pattern ids such as "L01, L02"): what a user can open to check the rule's
claim.  Retrieved 2026-12-01; the PyTorch pages are the "stable" documentation."""
from __future__ import annotations

RETRIEVED = "2026-12-01"

_TORCH = "https://docs.pytorch.org/docs/stable/"

PATTERN_URLS: dict[str, tuple[str, ...]] = {
    "L01": (_TORCH + "accelerator.html",),
    "L02": (_TORCH + "accelerator.html",),
    "L03": (_TORCH + "generated/torch.accelerator.synchronize.html",),
    "L04": (_TORCH + "amp.html",),
    "L05": (_TORCH + "backends.html", _TORCH + "notes/randomness.html"),
    "L06": (_TORCH + "generated/torch.manual_seed.html", _TORCH + "notes/randomness.html"),
    "L07": (_TORCH + "accelerator.html",),
    "L08": (_TORCH + "accelerator.html",),
    "L09": (_TORCH + "accelerator.html",),
    "L10": (_TORCH + "accelerator.html",),
    "L11": (_TORCH + "data.html#memory-pinning",),
    "L12": (_TORCH + "notes/cuda.html",),
    "L13": (_TORCH + "distributed.html",),
    "L14": (_TORCH + "generated/torch.Event.html",),
    "L15": (_TORCH + "generated/torch.Stream.html",),
    "L16": (_TORCH + "cpp_extension.html",),
    "L17": (_TORCH + "library.html",),
    "L18": (_TORCH + "amp.html", _TORCH + "optim.html"),
    "L19": (_TORCH + "generated/torch.nn.functional.scaled_dot_product_attention.html",),
    "L20": ("https://huggingface.co/docs/bitsandbytes/main/non_cuda_backends",),
    "L21": ("https://github.com/deepspeedai/DeepSpeed/tree/master/accelerator",),
    "L22": ("https://rocm.docs.amd.com/en/latest/conceptual/gpu-isolation.html",),
    "L23": (_TORCH + "notes/mps.html",),
    "L24": ("https://github.com/pytorch/xla/blob/master/TROUBLESHOOTING.md",),
    "L25": ("https://github.com/pytorch/xla/blob/master/TROUBLESHOOTING.md",),
    "L26": (_TORCH + "notes/cuda.html#cuda-graphs",),
    "L27": (_TORCH + "torch.compiler.html",),
    "L28": (_TORCH + "profiler.html",),
    "L29": (_TORCH + "tensors.html",),
    # TorchTPU and TorchNeuron, which replace torch_xla on their chips.
    "TORCHTPU": ("https://pypi.org/project/torch-tpu/", "https://awsdocs-neuron.readthedocs-hosted.com/"),
}


def urls(sources: str) -> list[str]:
    """The public pages for a rule's ``sources`` ("L01, L02", "L09-L15"), once each, in order."""
    found: list[str] = []
    for part in (part.strip() for part in sources.split(",")):
        first, _, last = part.partition("-")
        if last and first[:1] == last[:1] == "L":  # a range of patterns, "L09-L15"
            names = [f"L{number:02d}" for number in range(int(first[1:]), int(last[1:]) + 1)]
        else:
            names = [part]
        for name in names:
            found += PATTERN_URLS.get(name, ())
    return list(dict.fromkeys(found))
