"""Every rule: a positive case, a negative case and an alias-resolution case.

Each case is a real file written into tmp_path and scanned by the real scanner;
the table must cover every rule in the catalogue (checked below).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchport.scan import RULES
from torchport.scan.config import ScanConfig
from torchport.scan.fixer import fix_text
from torchport.scan.scanner import scan

# rule id -> (file name, source).  Python sources get `import torch` unless they import it.
POSITIVE = {
    "TP001": ("a.py", 'x = torch.zeros(2, device="cuda:0")'),
    "TP002": ("a.py", "model = model.cuda()"),
    "TP003": ("a.py", "use_gpu = torch.cuda.is_available()"),
    "TP004": ("a.py", "torch.cuda.set_device(1)"),
    "TP005": ("a.py", "print(torch.cuda.get_device_properties(0).total_memory)"),
    "TP006": ("a.py", "x = torch.cuda.LongTensor([1, 2])"),
    "TP007": ("a.py", 'assert torch.cuda.is_available(), "needs an NVIDIA GPU"'),
    "TP101": ("a.py", "torch.cuda.synchronize()"),
    "TP102": ("a.py", "torch.cuda.manual_seed(0)"),
    "TP103": ("a.py", "torch.cuda.set_rng_state(state)"),
    "TP104": ("a.py", "used = torch.cuda.memory_allocated()"),
    "TP105": ("a.py", "torch.cuda.empty_cache()"),
    "TP106": ("a.py", "end = torch.cuda.Event(enable_timing=True)"),
    "TP107": ("a.py", "with torch.cuda.stream(side):\n    pass"),
    "TP108": ("a.py", "g = torch.cuda.CUDAGraph()"),
    "TP109": ("a.py", 'out = subprocess.run(["nvidia-smi", "-L"])'),
    "TP110": ("a.py", "torch.cuda.ipc_collect()"),
    "TP111": ("a.py", "free, total = torch.cuda.mem_get_info()"),
    "TP112": ("a.py", "torch.cuda.reset_peak_memory_stats()"),
    "TP201": ("a.py", "with torch.cuda.amp.autocast():\n    pass"),
    "TP202": ("a.py", "scaler = torch.amp.GradScaler()"),
    "TP203": ("a.py", "@torch.cuda.amp.custom_bwd\ndef backward(ctx, g):\n    return g"),
    "TP301": ("a.py", "torch.backends.cudnn.benchmark = True"),
    "TP302": ("a.py", "torch.backends.cudnn.allow_tf32 = False"),
    "TP303": ("a.py", "with torch.backends.cuda.sdp_kernel(enable_flash=True):\n    pass"),
    "TP304": ("a.py", 'step = torch.compile(lambda x: x, backend="inductor")'),
    "TP401": ("a.py", 'torch.distributed.init_process_group(backend="nccl")'),
    "TP402": ("a.py", "loader = DataLoader(ds, pin_memory=True)"),
    "TP403": ("a.py", 'x = x.to("cpu", non_blocking=True)'),
    "TP404": ("run.sh", "CUDA_VISIBLE_DEVICES=0,1 torchrun train.py\n"),  # torchport: ignore
    "TP501": ("setup.py", "from torch.utils.cpp_extension import CUDAExtension\n"
                          'ext = CUDAExtension("k", ["k.cpp", "k_kernel.cu"])'),
    "TP502": ("kernel.cu", "__global__ void add(float *x) { x[threadIdx.x] += 1; }\n"),
    "TP503": ("a.py", "import triton\nimport triton.language as tl"),
    "TP504": ("a.py", "from torch.utils.cpp_extension import load\n"
                      'load(name="fused_cuda", sources=["fused.cpp", "fused_kernel.cu"])\nimport fused_cuda'),
    "TP505": ("kernel.cu", 'asm volatile("bar.sync 0;");\n'),
    "TP601": ("requirements.txt", "numpy\nflash-attn==2.6.3\n"),
    "TP701": ("a.py", "x = torch.ones(3, dtype=torch.float64, device=device)"),
    "TP801": ("a.py", "import torch_xla.core.xla_model as xm\nxm.mark_step()"),
    "TP802": ("a.py", "import torch_xla"),
}

NEGATIVE = {
    "TP001": ("a.py", 'x = torch.zeros(2, device="cpu")\nlabel = "cudagraphs"'),
    "TP002": ("a.py", "model = model.to(device)\ncuda = 3"),
    "TP003": ("a.py", "use_accel = torch.accelerator.is_available()"),
    "TP004": ("a.py", "torch.accelerator.set_device_index(1)"),
    "TP005": ("a.py", "caps = torch.accelerator.get_device_capability()"),
    "TP006": ("a.py", "x = torch.LongTensor([1, 2])"),
    "TP007": ("a.py", 'def check():\n    assert torch.cuda.is_available(), "needs an NVIDIA GPU"'),
    "TP101": ("a.py", "torch.accelerator.synchronize()"),
    "TP102": ("a.py", "torch.manual_seed(0)\ng = torch.Generator().manual_seed(1)"),
    "TP103": ("a.py", "state = torch.get_rng_state()"),
    "TP104": ("a.py", "used = torch.accelerator.memory_allocated()"),
    "TP105": ("a.py", "torch.accelerator.empty_cache()"),
    "TP106": ("a.py", "end = torch.Event(enable_timing=True)"),
    "TP107": ("a.py", "side = torch.Stream()"),
    "TP108": ("a.py", "compiled = torch.compile(model)"),
    "TP109": ("a.py", 'print("see the nvidia docs")'),
    "TP110": ("a.py", "n = torch.accelerator.device_count()"),
    "TP111": ("a.py", "free, total = torch.accelerator.get_memory_info()"),
    "TP112": ("a.py", "used = torch.cuda.max_memory_allocated()"),
    "TP201": ("a.py", 'with torch.autocast("cpu", dtype=torch.bfloat16):\n    pass'),
    "TP202": ("a.py", 'scaler = torch.amp.GradScaler("cpu")'),
    "TP203": ("a.py", '@torch.amp.custom_bwd(device_type="cpu")\ndef backward(ctx, g):\n    return g'),
    "TP301": ("a.py", "torch.use_deterministic_algorithms(True)"),
    "TP302": ("a.py", 'torch.set_float32_matmul_precision("high")'),
    "TP303": ("a.py", "from torch.nn.attention import sdpa_kernel"),
    "TP304": ("a.py", 'step = torch.compile(lambda x: x, backend="openxla", mode="inductor")'),
    "TP401": ("a.py", 'torch.distributed.init_process_group(backend="gloo")'),
    "TP402": ("a.py", "loader = DataLoader(ds, pin_memory=False)"),
    "TP403": ("a.py", 'x = x.to("cpu", non_blocking=False)\ny = x.to(device, non_blocking=True)'),
    "TP404": ("run.sh", "# CUDA_VISIBLE_DEVICES is not used here\nNEURON_RT_VISIBLE_CORES=0 python t.py\n"),
    "TP501": ("setup.py", "from torch.utils.cpp_extension import CppExtension\n"
                          'ext = CppExtension("k", ["k.cpp"])'),
    "TP502": ("kernel.cpp", "#include <torch/extension.h>\nint f() { return 1; }\n"),
    "TP503": ("a.py", "import tritonclient  # an unrelated package"),
    "TP504": ("a.py", "from torch.utils.cpp_extension import load\n"
                      'load(name="fused_cpu", sources=["fused.cpp"])\nimport fused_cpu'),
    "TP505": ("kernel.cpp", '// asm volatile("bar.sync 0;") is PTX\nvoid f() { asm("nop"); }\n'),
    "TP601": ("requirements.txt", "numpy\nflash-attention-helpers-cpu==1.0\ntorch>=2.9\n"),
    "TP701": ("a.py", "x = torch.ones(3, dtype=torch.float32)\ny = numpy.float64(1)"),
    "TP801": ("a.py", "import torch_xla\ndevice = torch_xla.device()"),
    "TP802": ("a.py", 'x = torch.ones(2, device="cpu")'),
}

ALIASES = {
    "TP001": ("a.py", 'DEVICE = "cuda"\nx = torch.ones(2).to(DEVICE)'),
    "TP002": ("a.py", "import torch as th\nnet = th.nn.Linear(2, 2).cuda(0)"),
    "TP003": ("a.py", "import torch as th\ndev = 'cuda' if th.cuda.is_available() else 'cpu'"),
    "TP004": ("a.py", "from torch import cuda\nn = cuda.device_count()"),
    "TP005": ("a.py", "from torch.cuda import get_device_name as gpu_name\nprint(gpu_name())"),
    "TP006": ("a.py", "from torch import cuda\nx = cuda.HalfTensor(2)"),
    "TP007": ("a.py", "from torch import cuda\nif not cuda.is_available():\n    raise ImportError('needs CUDA')"),
    "TP101": ("a.py", "from torch.cuda import synchronize as sync\ndef step():\n    sync()"),
    "TP102": ("a.py", "import torch.cuda as tc\ntc.manual_seed_all(3)"),
    "TP103": ("a.py", "from torch.cuda import get_rng_state\ns = get_rng_state()"),
    "TP104": ("a.py", "from torch.cuda import memory\nm = memory.max_memory_reserved()"),
    "TP105": ("a.py", "import torch as th\nth.cuda.empty_cache()"),
    "TP106": ("a.py", "from torch.cuda import Event\ne = Event()"),
    "TP107": ("a.py", "from torch import cuda as gpu\ns = gpu.current_stream()"),
    "TP108": ("a.py", "from torch.cuda import graphs\ng = graphs.make_graphed_callables(m, (x,))"),
    "TP109": ("a.py", "import torch.cuda.nvtx as nvtx\nnvtx.range_push('step')"),
    "TP110": ("a.py", "from torch.cuda import is_initialized\nok = is_initialized()"),
    "TP111": ("a.py", "from torch.cuda import mem_get_info as free_memory\nfree, _ = free_memory(0)"),
    "TP112": ("a.py", "import torch.cuda as tc\nprint(tc.memory_summary())"),
    "TP201": ("a.py", "from torch.cuda.amp import autocast\ndef f():\n    with autocast(dtype=torch.bfloat16):\n        pass"),
    "TP202": ("a.py", "from torch.cuda.amp import GradScaler as Scaler\ns = Scaler()"),
    "TP203": ("a.py", "from torch.cuda.amp import custom_fwd\n@custom_fwd\ndef forward(ctx, x):\n    return x"),
    "TP301": ("a.py", "from torch.backends import cudnn\ncudnn.deterministic = True"),
    "TP302": ("a.py", "import torch as th\nmatmul = th.backends.cuda.matmul\nmatmul.allow_tf32 = True"),
    "TP303": ("a.py", "from torch.backends.cuda import enable_flash_sdp as flash\nflash(False)"),
    "TP304": ("a.py", 'from torch import compile as jit\nstep = jit(lambda x: x, backend="inductor")'),
    "TP401": ("a.py", 'import torch.distributed as dist\nBACKEND = "nccl"\ndist.init_process_group(BACKEND)'),
    "TP402": ("a.py", "batch = batch.pin_memory()"),
    "TP403": ("a.py", 'y = x.to(device="cpu", non_blocking=True)'),
    "TP404": ("a.py", 'import os\nos.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")'),
    "TP501": ("build.py", "from torch.utils import cpp_extension as ce\n"
                          'mod = ce.load(name="k", sources=["k.cpp", "k.cu"])'),
    "TP502": ("ops.cpp", '#include "ATen/cuda/CUDAContext.h"\n'),
    "TP503": ("a.py", "import triton as tr\n@tr.jit\ndef kernel(x_ptr):\n    pass"),
    "TP504": ("a.py", "from torch.utils import cpp_extension as ce\n"
                      'ce.load(name="pkg._ops", sources=["k.cu"])\nfrom pkg import _ops as ops'),
    "TP505": ("conv.cpp", "#include <cudnn_frontend.h>\nnamespace fe = cudnn_frontend;\n"),
    "TP601": ("a.py", "from apex.optimizers import FusedAdam as Adam"),
    "TP701": ("a.py", "from torch import float64 as f64\nx = torch.ones(2, dtype=f64).to(device)"),
    "TP801": ("a.py", "from torch_xla.core import xla_model\nd = xla_model.xla_device()"),
    "TP802": ("a.py", 'x = torch.ones(2).to("xla")'),
}


def _write(tmp_path: Path, name: str, source: str) -> Path:
    if name.endswith(".py") and "import torch\n" not in source and not source.startswith("import torch"):
        source = "import torch\n" + textwrap.dedent(source) + "\n"
    path = tmp_path / name
    path.write_text(source)
    return path


def _rules_found(tmp_path: Path, name: str, source: str) -> set[str]:
    path = _write(tmp_path, name, source)
    result = scan([path], ScanConfig())
    assert not result.skipped, result.skipped
    return {f.rule_id for f in result.findings}


def test_every_rule_has_three_cases():
    ids = {rule.id for rule in RULES}
    assert set(POSITIVE) == ids
    assert set(NEGATIVE) == ids
    assert set(ALIASES) == ids


@pytest.mark.parametrize("rule_id", sorted(POSITIVE))
def test_positive(tmp_path, rule_id):
    assert rule_id in _rules_found(tmp_path, *POSITIVE[rule_id])


@pytest.mark.parametrize("rule_id", sorted(NEGATIVE))
def test_negative(tmp_path, rule_id):
    assert rule_id not in _rules_found(tmp_path, *NEGATIVE[rule_id])


@pytest.mark.parametrize("rule_id", sorted(ALIASES))
def test_alias_resolution(tmp_path, rule_id):
    assert rule_id in _rules_found(tmp_path, *ALIASES[rule_id])


def test_constant_followed_to_its_use(tmp_path):
    path = _write(tmp_path, "a.py", 'device = "cuda"\n\ndef f(x):\n    return x.to(device)\n')
    finding, = [f for f in scan([path], ScanConfig()).findings if f.rule_id == "TP001"]
    assert (finding.line, finding.column) == (2, 10)  # the literal, below `import torch`


def test_fast_path_finds_the_same_as_a_full_parse(tmp_path):
    """The scanner parses only statements with trigger words; the fixer parses
    whole files.  On a file mixing everything, both must agree."""
    import ast

    from torchport.scan import python

    source = "\n".join(["import torch", "from torch.cuda import synchronize as sync", ""]
                       + ["class Model(torch.nn.Module):", '    """Docs mention cuda.', "",
                          "Example:", "model.cuda()", '    """']
                       + [f"    def method_{i}(self):\n        return {i}\n" for i in range(30)]
                       + ["    def to_gpu(self):", "        sync()", "        return self.cuda()", "",
                          "    @staticmethod", "    @torch.cuda.amp.custom_fwd",
                          "    def forward(ctx, x):", "        if x.is_cuda:", "            pass",
                          "        return x", "",
                          "    def long(self, a,", "             b):"]
                       + [f"        v{i} = {i}" for i in range(50)]
                       + ["        torch.cuda.empty_cache()", "        return a", "",
                          "def unrelated():", "    return 1", ""])
    tree = python.parse_relevant(source)
    fast = sorted((f.rule_id, f.line, f.column) for f in python.analyze(tree, source, "a.py"))
    full = sorted((f.rule_id, f.line, f.column) for f in python.analyze(ast.parse(source), source, "a.py"))
    assert fast == full
    assert {rule for rule, _, _ in full} == {"TP101", "TP002", "TP203", "TP003", "TP105"}


@pytest.mark.parametrize("source_path", [
    Path(__file__).resolve().parents[1] / "examples" / "cuda_training" / "train.py",
    Path(__file__).resolve().parents[1] / "src" / "torchport" / "scan" / "python.py",
    Path(__file__).resolve().parents[1] / "src" / "torchport" / "scan" / "detectors" / "core.py",
], ids=lambda p: p.name)
def test_fast_path_agrees_on_real_files(source_path):
    import ast

    from torchport.scan import python
    from torchport.scan.scanner import parse_python

    source = source_path.read_text()
    tree = parse_python(source, fast=True)  # falls back to the whole file if a cut fails
    fast = sorted((f.rule_id, f.line, f.column, f.fix is not None)
                  for f in python.analyze(tree, source, "f")) if tree else []
    full = sorted((f.rule_id, f.line, f.column, f.fix is not None)
                  for f in python.analyze(ast.parse(source), source, "f"))
    assert fast == full and full


def _compile_findings(tmp_path, source):
    path = tmp_path / "train.py"
    path.write_text(source)
    return [f for f in scan([path], ScanConfig()).findings if f.rule_id == "TP304"]


@pytest.mark.parametrize("call, fixed", [
    ('torch.compile(model, backend="inductor")', "torch.compile(model)"),
    ('torch.compile(backend="inductor", mode="max-autotune", model=model)',
     'torch.compile(mode="max-autotune", model=model)'),
    ('torch.compile(model, mode="default", backend="inductor", fullgraph=True)',
     'torch.compile(model, mode="default", fullgraph=True)'),
])
def test_inductor_backend_is_found_and_dropped(tmp_path, call, fixed):
    """TP304: the file's only trigger word is "inductor", so this also checks that the
    fast path keeps a file the rule family asked for (TRIGGER_WORDS)."""
    source = f"import torch\n\nmodel = torch.nn.Linear(2, 2)\ncompiled = {call}\n"
    findings = _compile_findings(tmp_path, source)
    assert [(f.line, f.detail) for f in findings] == [(4, 'backend="inductor"')]
    rewritten, applied, _ = fix_text(source, "train.py", ScanConfig(), "2.13")
    assert rewritten == source.replace(call, fixed)
    assert [f.rule_id for f in applied] == ["TP304"]


def test_inductor_backend_decorator_and_other_backends(tmp_path):
    source = ("import torch\nfrom torch import compile as tc\n\n\n"
              '@torch.compile(backend="inductor")\ndef step(x):\n    return x\n\n\n'
              'a = torch.compile(step)\nb = torch.compile(step, backend="openxla")\n'
              'c = tc(step, backend="inductor")\nd = other.compile(step, backend="inductor")\n')
    assert [f.line for f in _compile_findings(tmp_path, source)] == [5, 12]
    rewritten, _, _ = fix_text(source, "train.py", ScanConfig(), "2.13")
    assert "@torch.compile()\n" in rewritten and "c = tc(step)\n" in rewritten
    assert 'backend="openxla"' in rewritten and 'other.compile(step, backend="inductor")' in rewritten


# Arguments for the memory calls that take one; the rest are called bare.
_MEMORY_CALL_ARGS = {"set_per_process_memory_fraction": "0.5", "caching_allocator_alloc": "16",
                     "caching_allocator_delete": "0"}


def _memory_call_names(rule_id: str) -> list[str]:
    from torchport.scan.detectors.cuda_runtime import CUDA_NAMES_HERE, CUDA_RENAMES_HERE
    renamed = [name for name, (rule, _, _) in CUDA_RENAMES_HERE.items() if rule == rule_id]
    return sorted(renamed + [name for name, rule in CUDA_NAMES_HERE.items() if rule == rule_id])


@pytest.mark.parametrize(("rule_id", "raises"), [("TP104", False), ("TP112", True)])
def test_memory_rules_say_what_the_calls_do_without_cuda(tmp_path, rule_id, raises):
    """Each call of the two memory rules, run on this CPU build: TP112's raise (error), TP104's
    return a value (silent: a statistic that reads 0)."""
    import torch
    assert not torch.cuda.is_available()
    rule = {r.id: r for r in RULES}[rule_id]
    assert rule.severity["xla"] == ("error" if raises else "silent")
    names = _memory_call_names(rule_id)
    assert names
    for name in names:
        call = f"torch.cuda.{name}({_MEMORY_CALL_ARGS.get(name, '')})"
        try:
            eval(call)  # noqa: S307 - a call built from the detector's own table
        except Exception:  # noqa: BLE001 - which exception depends on the call
            assert raises, f"{call} raised without CUDA but {rule_id} says silent"
        else:
            assert not raises, f"{call} did not raise without CUDA but {rule_id} says error"
        source = tmp_path / f"{name}.py"
        source.write_text(f"import torch\n\nvalue = {call}\n")
        found = {f.rule_id for f in scan([source], ScanConfig(), jobs=1).findings}
        assert rule_id in found, (name, found)
