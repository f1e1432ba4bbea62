"""The rule catalogue: every portability rule ``torchport scan`` knows, in one table.

Each rule has a stable id (``TP`` + three digits; the hundreds digit is the
class), a severity per target, the portable replacement with the torch version
it needs, whether ``torchport fix`` rewrites it, and a before/after example.
The tests run every example through the scanner (and, for fixable rules, the
fixer), so the catalogue cannot drift from what the code does.

``sources`` names the lock-in pattern(s) each rule implements (L01-L29);
``torchport.scan.sources`` maps them to the public documentation users can open.
"""
from __future__ import annotations

from dataclasses import dataclass

from torchport import glossary

# The scan targets come from the device-family table, in its listing order.
TARGETS: tuple[str, ...] = glossary.scan_targets()
TARGET_NAMES = {family.scan_target: family.scan_title for family in glossary.FAMILIES if family.scan_target}

# Severity, worst first.  "silent" ranks below "error" for --fail-on (an error
# stops the program, so it is the stronger gate) but the report lists silent
# findings first, because nothing else will reveal them.
SEVERITIES: tuple[str, ...] = ("error", "silent", "perf", "info")
SEVERITY_RANK = glossary.severity_ranking(reversed(SEVERITIES))  # higher is worse, as in trace

EFFORTS: tuple[str, ...] = ("none", "low", "medium", "high")


@dataclass(frozen=True)
class Severities:
    """A rule's severity on each scan target: ``default`` on every target but
    the ones ``exceptions`` names (None: fine there).  A device family added to
    the glossary gets the default, so only a target that differs is written."""
    default: str | None
    exceptions: dict[str, str | None]

    def on(self, targets: tuple[str, ...] | list[str]) -> dict[str, str | None]:
        return glossary.per_target(targets, self.default, self.exceptions)


def on_targets(default: str | None, **exceptions: str | None) -> Severities:
    """``on_targets("error", rocm=None)``: an error everywhere except ROCm, where it is fine."""
    for severity in (default, *exceptions.values()):
        if severity is not None and severity not in SEVERITIES:
            raise ValueError(f"unknown severity {severity!r} (known: {', '.join(SEVERITIES)})")
    return Severities(default, exceptions)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    title: str
    detects: str
    why: str
    severity: dict[str, str | None]  # on each of TARGETS, from ``severities``
    replacement: str
    min_torch: str | None
    fixable: bool
    effort: str  # manual effort for a finding that ``fix`` does not rewrite
    before: str
    after: str
    severities: Severities  # as declared: a default and the targets that differ
    sources: str = ""

    def worst(self, targets: tuple[str, ...] | list[str]) -> str | None:
        found = [severity for t in targets if (severity := self.severity[t])]
        return max(found, key=SEVERITY_RANK.__getitem__) if found else None


def _rule(id, name, title, *, detects, why, severity: Severities, replacement, min_torch, fixable,
          effort, before, after, sources=""):
    return Rule(id, name, title, detects, why, severity.on(TARGETS), replacement, min_torch,
                fixable, effort, before.strip("\n") + "\n", after.strip("\n") + "\n", severity, sources)


# Rule ids as named constants: the detectors import these, so a misspelt id fails
# at import instead of producing findings of a rule that does not exist.  Each
# constant is the rule's name in capitals (tests/test_scan_detectors.py checks).
CUDA_DEVICE_STRING = "TP001"
DOT_CUDA = "TP002"
CUDA_AVAILABILITY_CHECK = "TP003"
CUDA_DEVICE_MANAGEMENT = "TP004"
CUDA_DEVICE_PROPERTIES = "TP005"
CUDA_TENSOR_TYPE = "TP006"
CUDA_REQUIRED_AT_IMPORT = "TP007"
CUDA_SYNCHRONIZE = "TP101"
CUDA_MANUAL_SEED = "TP102"
CUDA_RNG_STATE = "TP103"
CUDA_MEMORY_STATS = "TP104"
CUDA_EMPTY_CACHE = "TP105"
CUDA_EVENT = "TP106"
CUDA_STREAM = "TP107"
CUDA_GRAPHS = "TP108"
NVIDIA_TOOLING = "TP109"
OTHER_TORCH_CUDA_API = "TP110"
CUDA_MEMORY_INFO = "TP111"
CUDA_MEMORY_CONTROL = "TP112"
CUDA_AUTOCAST = "TP201"
CUDA_GRAD_SCALER = "TP202"
CUDA_CUSTOM_FWD = "TP203"
CUDNN_FLAGS = "TP301"
TF32_FLAGS = "TP302"
CUDA_SDP_KERNEL = "TP303"
INDUCTOR_COMPILE_BACKEND = "TP304"
NCCL_BACKEND = "TP401"
PIN_MEMORY = "TP402"
NON_BLOCKING_COPY = "TP403"
CUDA_VISIBLE_DEVICES = "TP404"
CUDA_EXTENSION_BUILD = "TP501"
CUDA_SOURCE_FILE = "TP502"
TRITON_KERNEL = "TP503"
CUDA_EXTENSION_IMPORT = "TP504"
NON_HIPIFIABLE_CODE = "TP505"
CUDA_ONLY_PACKAGE = "TP601"
FLOAT64 = "TP701"
DEPRECATED_TORCH_XLA_API = "TP801"
TORCH_XLA_API = "TP802"

DEVICE_LINE_EXAMPLE = (
    'ACCELERATOR_DEVICE = torch.accelerator.current_accelerator(check_available=True) '
    'or torch.device("cpu")'
)

RULES: tuple[Rule, ...] = (
    # -- TP0xx: where tensors live -------------------------------------------------
    _rule(
        CUDA_DEVICE_STRING, "cuda-device-string", 'Hard-coded "cuda" device string',
        detects='"cuda" / "cuda:N" in torch.device(), .to(), device=, device_type=, '
                'map_location=, torch.set_default_device(), argparse defaults and '
                'parameter defaults for device options, and string constants assigned to a name.',
        why="Every accelerator except ROCm has its own device type ('tpu', 'xla', 'neuron', "
            "'xpu', 'mps'); a literal 'cuda' raises there. ROCm reuses 'cuda'.",
        severity=on_targets("error", rocm=None),
        replacement="one device chosen once: torch.accelerator.current_accelerator("
                    "check_available=True) or torch.device('cpu') (torch 2.7; 2.6 without "
                    "check_available); torch_xla still needs torch_xla.device()",
        min_torch="2.6", fixable=True, effort="low", sources="L01",
        before='''
import torch

DEVICE = "cuda"
x = torch.zeros(3, device="cuda")
y = x.to(torch.device("cuda"))
''',
        after=f'''
import torch

{DEVICE_LINE_EXAMPLE}

DEVICE = ACCELERATOR_DEVICE.type
x = torch.zeros(3, device=ACCELERATOR_DEVICE)
y = x.to(ACCELERATOR_DEVICE)
''',
    ),
    _rule(
        DOT_CUDA, "dot-cuda", "`.cuda()` moves a tensor or module to CUDA",
        detects="calls of a .cuda() method on any object (tensors, modules, anything).",
        why="`.cuda()` exists only for CUDA (and ROCm, which reports as CUDA); elsewhere it "
            "raises 'Torch not compiled with CUDA enabled'.",
        severity=on_targets("error", rocm=None),
        replacement=".to(device) with the device from torch.accelerator; .cuda(i) becomes "
                    ".to(accelerator_device(i)), a function the fix inserts that takes an int, a "
                    "string or a torch.device like .cuda() does; non_blocking= is kept",
        min_torch="2.6", fixable=True, effort="low", sources="L01",
        before='''
import torch

model = torch.nn.Linear(2, 2).cuda()
batch = torch.ones(2).cuda(non_blocking=True)
''',
        after=f'''
import torch

{DEVICE_LINE_EXAMPLE}

model = torch.nn.Linear(2, 2).to(ACCELERATOR_DEVICE)
batch = torch.ones(2).to(ACCELERATOR_DEVICE, non_blocking=True)
''',
    ),
    _rule(
        CUDA_AVAILABILITY_CHECK, "cuda-availability-check", "Device chosen by a CUDA-only check",
        detects="torch.cuda.is_available(), tensor.is_cuda, and comparisons with 'cuda' "
                "(device.type == 'cuda').",
        why="On TPU, Trainium, XPU and MPS the check is simply False: the program silently "
            "falls back to the CPU path (or skips accelerator-only code).",
        severity=on_targets("silent", rocm=None, cpu=None),
        replacement="torch.accelerator.is_available() (torch 2.6); compare device.type with "
                    "the chosen accelerator's type",
        min_torch="2.6", fixable=True, effort="low", sources="L01, L02",
        before='''
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if torch.cuda.is_available():
    torch.cuda.synchronize()
''',
        after=f'''
import torch

{DEVICE_LINE_EXAMPLE}

device = ACCELERATOR_DEVICE
if torch.accelerator.is_available():
    torch.accelerator.synchronize()
''',
    ),
    _rule(
        CUDA_DEVICE_MANAGEMENT, "cuda-device-management", "CUDA device index management",
        detects="torch.cuda.device_count, current_device, set_device, device(i), device_of; "
                "DistributedDataParallel(device_ids=[...]), CUDA indices.",
        why="These ask the CUDA runtime: set_device raises off CUDA; device_count returns 0, "
            "so multi-device code takes the single-device path.",
        severity=on_targets("error", rocm=None),
        replacement="torch.accelerator.device_count / current_device_index / "
                    "set_device_index (2.6), torch.accelerator.device_index(i) (2.8); all but "
                    "device_count raise without an accelerator, so the fix guards them",
        min_torch="2.6", fixable=True, effort="low", sources="L09",
        before='''
import torch

torch.cuda.set_device(0)
n = torch.cuda.device_count()
''',
        after='''
import torch

if torch.accelerator.is_available():
    torch.accelerator.set_device_index(0)
n = torch.accelerator.device_count()
''',
    ),
    _rule(
        CUDA_DEVICE_PROPERTIES, "cuda-device-properties", "CUDA device properties queried",
        detects="torch.cuda.get_device_name, get_device_properties, get_device_capability, "
                "get_arch_list, is_bf16_supported, is_tf32_supported.",
        why="They raise without CUDA; capability numbers (sm_80...) mean nothing elsewhere.",
        severity=on_targets("error", rocm=None),
        replacement="torch.get_device_module(device).get_device_name() (2.4; not on TorchTPU "
                    "for every call); torch.accelerator.get_device_capability() (2.10, a dict)",
        min_torch="2.10", fixable=False, effort="medium", sources="L10",
        before='''
import torch

name = torch.cuda.get_device_name(0)
''',
        after='''
import torch

capability = torch.accelerator.get_device_capability()
''',
    ),
    _rule(
        CUDA_TENSOR_TYPE, "cuda-tensor-type", "Legacy CUDA tensor type",
        detects="torch.cuda.FloatTensor, LongTensor, HalfTensor, ... (constructors and type checks).",
        why="The legacy typed-tensor classes exist only for CUDA.",
        severity=on_targets("error", rocm=None),
        replacement="torch.tensor(data, dtype=..., device=device); isinstance checks on "
                    "tensor.dtype and tensor.device instead",
        min_torch=None, fixable=False, effort="low", sources="L29",
        before='''
import torch

x = torch.cuda.FloatTensor(4)
''',
        after='''
import torch

x = torch.empty(4, dtype=torch.float32, device=device)
''',
    ),
    _rule(
        CUDA_REQUIRED_AT_IMPORT, "cuda-required-at-import", "Module that refuses to import without CUDA",
        detects="at a module's top level, assert torch.cuda.is_available() (or torch.version.cuda, "
                "device_count() > 0), an if on their absence that raises or exits, or a call of a function "
                "beside the module that opens with such a check; in a setup.py, a refusal to build.",
        why="Importing the module, and so its package and whatever imports it, stops there: on a "
            "machine without a CUDA device for is_available() and device_count() (ROCm passes them), "
            "on a build of torch without CUDA for torch.version.cuda (ROCm's included). The code "
            "behind a refusal of the machine never runs (its findings are info); this is the line to "
            "change. Info where every import of the module is guarded.",
        severity=on_targets("error"),
        replacement="pick the device with torch.accelerator (or take the user's) and keep a path for "
                    "other devices; raise only in the features that need CUDA, where they are used",
        min_torch="2.6", fixable=False, effort="medium", sources="L01",
        before='''
import torch

assert torch.cuda.is_available(), "this package needs an NVIDIA GPU"
''',
        after='''
import torch

DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
''',
    ),
    # -- TP1xx: torch.cuda runtime calls --------------------------------------------
    _rule(
        CUDA_SYNCHRONIZE, "cuda-synchronize", "torch.cuda.synchronize()",
        detects="torch.cuda.synchronize (also imported under another name).",
        why="Raises without CUDA. TorchTPU makes its own torch.tpu.synchronize internal from "
            "torch 2.11: only torch.accelerator.synchronize() is public there. On torch_xla "
            "the equivalent is xm.wait_device_ops(), not torch_xla.sync().",
        severity=on_targets("error", rocm=None),
        replacement="torch.accelerator.synchronize() (torch 2.6). It raises on a machine with "
                    "no accelerator: the fix guards it with torch.accelerator.is_available() "
                    "unless it already runs only where CUDA is present",
        min_torch="2.6", fixable=True, effort="low", sources="L03",
        before='''
import torch

torch.cuda.synchronize()
''',
        after='''
import torch

if torch.accelerator.is_available():
    torch.accelerator.synchronize()
''',
    ),
    _rule(
        CUDA_MANUAL_SEED, "cuda-manual-seed", "CUDA-only seeding",
        detects="torch.cuda.manual_seed, manual_seed_all, seed, seed_all.",
        why="Off CUDA the call is silently ignored: the accelerator's generator is never "
            "seeded and runs stop being reproducible, with no warning.",
        severity=on_targets("silent", rocm=None),
        replacement="torch.manual_seed(seed) seeds the CPU and every accelerator (CUDA, MPS, "
                    "XPU, MTIA, PrivateUse1). It also reseeds the CPU generator.",
        min_torch=None, fixable=True, effort="low", sources="L06",
        before='''
import torch

torch.cuda.manual_seed_all(42)
''',
        after='''
import torch

torch.manual_seed(42)
''',
    ),
    _rule(
        CUDA_RNG_STATE, "cuda-rng-state", "CUDA random-generator state",
        detects="torch.cuda.get_rng_state(_all), set_rng_state(_all), initial_seed.",
        why="Checkpoints save and restore only the CUDA generator; elsewhere they raise or "
            "restore nothing.",
        severity=on_targets("error", rocm=None),
        replacement="torch.accelerator.random.get_rng_state() (torch 2.14, no setter yet) or "
                    "torch.get_device_module(device).get_rng_state()",
        min_torch="2.14", fixable=False, effort="medium", sources="L06",
        before='''
import torch

state = torch.cuda.get_rng_state()
''',
        after='''
import torch

state = torch.get_device_module(device).get_rng_state()
''',
    ),
    _rule(
        CUDA_MEMORY_STATS, "cuda-memory-stats", "CUDA memory statistics",
        detects="torch.cuda.memory_allocated, max_memory_allocated, memory_reserved, "
                "max_memory_reserved, memory_stats, reset_peak_memory_stats, "
                "memory_cached, memory_stats_as_nested_dict, list_gpu_processes (mem_get_info and the "
                "calls that reset, summarise or limit CUDA memory raise: TP111, TP112)",
        why="Without CUDA, memory_stats() is {} and memory_allocated() reports 0: dashboards "
            "and OOM guards go silently wrong.",
        severity=on_targets("silent", rocm=None),
        replacement="torch.accelerator.memory_allocated() and friends (torch 2.9). They raise "
                    "on a machine with no accelerator: the fix falls back to torch.cuda's value "
                    "there (0, {})",
        min_torch="2.9", fixable=True, effort="low", sources="L07",
        before='''
import torch

peak = torch.cuda.max_memory_allocated() / 2**20
''',
        after='''
import torch

peak = (torch.accelerator.max_memory_allocated() if torch.accelerator.is_available() else 0) / 2**20
''',
    ),
    _rule(
        CUDA_MEMORY_INFO, "cuda-memory-info", "torch.cuda.mem_get_info()",
        detects="torch.cuda.mem_get_info.",
        why="Without CUDA it raises (no CUDA GPUs are available), unlike the memory "
            "statistics of TP104, which read 0.",
        severity=on_targets("error", rocm=None),
        replacement="torch.accelerator.get_memory_info() (torch 2.10), which raises on a "
                    "machine with no accelerator too: the fix rewrites it where a CUDA check "
                    "guards it",
        min_torch="2.10", fixable=True, effort="low", sources="L07",
        before='''
import torch

if torch.cuda.is_available():
    free, total = torch.cuda.mem_get_info()
''',
        after='''
import torch

if torch.accelerator.is_available():
    free, total = torch.accelerator.get_memory_info()
''',
    ),
    _rule(
        CUDA_MEMORY_CONTROL, "cuda-memory-control", "CUDA memory resets, summaries and limits",
        detects="torch.cuda.reset_peak_memory_stats, reset_accumulated_memory_stats, "
                "reset_max_memory_allocated, reset_max_memory_cached, memory_summary, "
                "memory_snapshot, set_per_process_memory_fraction, caching_allocator_alloc, "
                "caching_allocator_delete, memory_usage, device_memory_used.",
        why="Without CUDA these raise (the CUDA allocator is missing, or NVML is), unlike the "
            "memory statistics of TP104, which read 0.",
        severity=on_targets("error", rocm=None),
        replacement="torch.accelerator.reset_peak_memory_stats() and "
                    "reset_accumulated_memory_stats() (torch 2.9), which raise on a machine with "
                    "no accelerator too: the fix guards them; the others have no portable twin",
        min_torch="2.9", fixable=True, effort="low", sources="L07",
        before='''
import torch

torch.cuda.reset_peak_memory_stats()
''',
        after='''
import torch

if torch.accelerator.is_available():
    torch.accelerator.reset_peak_memory_stats()
''',
    ),
    _rule(
        CUDA_EMPTY_CACHE, "cuda-empty-cache", "torch.cuda.empty_cache()",
        detects="torch.cuda.empty_cache.",
        why="A no-op off CUDA: memory held by another backend's caching allocator is kept.",
        severity=on_targets("info", rocm=None, cpu=None),
        replacement="torch.accelerator.empty_cache() (torch 2.9), which raises where the CUDA "
                    "call did nothing: the fix guards it with torch.accelerator.is_available()",
        min_torch="2.9", fixable=True, effort="low", sources="L08",
        before='''
import torch

torch.cuda.empty_cache()
''',
        after='''
import torch

if torch.accelerator.is_available():
    torch.accelerator.empty_cache()
''',
    ),
    _rule(
        CUDA_EVENT, "cuda-event", "CUDA events for timing",
        detects="torch.cuda.Event.",
        why="Raises off CUDA. Under torch_xla's lazy tensors, event timing measures tracing, "
            "not execution.",
        severity=on_targets("error", rocm=None),
        replacement="torch.Event(enable_timing=True) (torch 2.4) plus "
                    "torch.accelerator.synchronize(); the torch_xla profiler on xla",
        min_torch="2.4", fixable=False, effort="low", sources="L14",
        before='''
import torch

start = torch.cuda.Event(enable_timing=True)
''',
        after='''
import torch

start = torch.Event(enable_timing=True)
''',
    ),
    _rule(
        CUDA_STREAM, "cuda-stream", "CUDA streams",
        detects="torch.cuda.Stream, stream, current_stream, default_stream, set_stream, "
                "StreamContext, ExternalStream.",
        why="Raise off CUDA; torch_xla has no streams; TorchTPU keeps its stream functions "
            "internal from torch 2.11.",
        severity=on_targets("error", rocm=None),
        replacement="torch.Stream and torch.accelerator.current_stream / set_stream (2.6)",
        min_torch="2.6", fixable=False, effort="medium", sources="L15",
        before='''
import torch

side = torch.cuda.Stream()
''',
        after='''
import torch

side = torch.Stream()
''',
    ),
    _rule(
        CUDA_GRAPHS, "cuda-graphs", "CUDA graphs",
        detects="torch.cuda.CUDAGraph, torch.cuda.graph, make_graphed_callables, graph_pool_handle.",
        why="CUDA graph capture exists only on CUDA; compiled backends on TPU and Trainium "
            "capture graphs their own way.",
        severity=on_targets("error", rocm=None),
        replacement="torch.accelerator.Graph (torch 2.12, coverage per backend unverified) or "
                    "torch.compile with the backend's default mode",
        min_torch="2.12", fixable=False, effort="medium", sources="L26",
        before='''
import torch

graph = torch.cuda.CUDAGraph()
''',
        after='''
import torch

graph = torch.accelerator.Graph()
''',
    ),
    _rule(
        NVIDIA_TOOLING, "nvidia-tooling", "NVIDIA-only tooling",
        detects="torch.cuda.nvtx, torch.cuda.set_sync_debug_mode, torch.cuda.profiler, "
                "torch.cuda.cudart, and 'nvidia-smi' in Python or shell scripts.",
        why="Profiling and monitoring hooks that only NVIDIA drivers provide.",
        severity=on_targets("error", rocm="info"),
        replacement="torch.profiler.record_function and the backend's own profiler",
        min_torch=None, fixable=False, effort="low", sources="L28",
        before='''
import torch

torch.cuda.nvtx.range_push("step")
''',
        after='''
import torch

with torch.profiler.record_function("step"):
    pass
''',
    ),
    _rule(
        OTHER_TORCH_CUDA_API, "other-torch-cuda-api", "Other torch.cuda API",
        detects="any torch.cuda.* name that no more specific rule covers.",
        why="torch.cuda talks to the CUDA runtime; off CUDA such calls raise or return "
            "CUDA-only answers.",
        severity=on_targets("error", rocm=None),
        replacement="the torch.accelerator equivalent if one exists, else "
                    "torch.get_device_module(device)",
        min_torch=None, fixable=False, effort="medium", sources="L09-L15",
        before='''
import torch

torch.cuda.ipc_collect()
''',
        after='''
import torch

torch.get_device_module(device).ipc_collect()
''',
    ),
    # -- TP2xx: mixed precision -----------------------------------------------------
    _rule(
        CUDA_AUTOCAST, "cuda-autocast", "CUDA autocast",
        detects='torch.cuda.amp.autocast(...) and torch.autocast / torch.amp.autocast with '
                'device_type "cuda".',
        why="Off CUDA, autocast('cuda') warns once and turns itself off: the model silently "
            "trains in float32. The default dtype differs by device (float16 on CUDA, "
            "bfloat16 on CPU), so a portable call spells the dtype out.",
        severity=on_targets("silent", rocm=None),
        replacement="torch.amp.autocast(device.type, dtype=...) with the dtype explicit "
                    "(bfloat16 is the usual choice on TPU)",
        min_torch="2.4", fixable=True, effort="low", sources="L04",
        before='''
import torch

with torch.cuda.amp.autocast():
    pass
''',
        after=f'''
import torch

{DEVICE_LINE_EXAMPLE}

with torch.amp.autocast(ACCELERATOR_DEVICE.type, dtype=torch.float16):
    pass
''',
    ),
    _rule(
        CUDA_GRAD_SCALER, "cuda-grad-scaler", "GradScaler bound to CUDA",
        detects="torch.cuda.amp.GradScaler(...), torch.amp.GradScaler() without a device "
                "(its default is still 'cuda') or with 'cuda'.",
        why="Off CUDA, GradScaler('cuda') warns and disables itself: no loss scaling, "
            "silently. (On TPU with bfloat16, scaling is not needed at all.)",
        severity=on_targets("silent", rocm=None),
        replacement="torch.amp.GradScaler(device.type, ...)",
        min_torch="2.4", fixable=True, effort="low", sources="L04",
        before='''
import torch

scaler = torch.cuda.amp.GradScaler(enabled=True)
''',
        after=f'''
import torch

{DEVICE_LINE_EXAMPLE}

scaler = torch.amp.GradScaler(ACCELERATOR_DEVICE.type, enabled=True)
''',
    ),
    _rule(
        CUDA_CUSTOM_FWD, "cuda-custom-fwd", "torch.cuda.amp.custom_fwd / custom_bwd",
        detects="torch.cuda.amp.custom_fwd and custom_bwd decorators.",
        why="Deprecated since torch 2.4 and tied to CUDA autocast: off CUDA the custom "
            "function's casting rules do not apply.",
        severity=on_targets("silent", rocm=None),
        replacement="torch.amp.custom_fwd(device_type=...) / custom_bwd(device_type=...) (2.4)",
        min_torch="2.4", fixable=False, effort="low", sources="L04",
        before='''
import torch

@torch.cuda.amp.custom_fwd
def forward(ctx, x):
    return x
''',
        after='''
import torch

@torch.amp.custom_fwd(device_type="cpu")
def forward(ctx, x):
    return x
''',
    ),
    # -- TP3xx: backend flags -----------------------------------------------------------
    _rule(
        CUDNN_FLAGS, "cudnn-flags", "cuDNN flags",
        detects="torch.backends.cudnn.benchmark, deterministic, enabled, is_available, version.",
        why="No effect off cuDNN: cudnn.deterministic=True does not make other backends "
            "deterministic, and benchmark tuning does not happen.",
        severity=on_targets("info"),
        replacement="torch.use_deterministic_algorithms(True) for determinism (stricter: it "
                    "raises on nondeterministic ops); no general replacement for benchmark",
        min_torch=None, fixable=False, effort="low", sources="L05",
        before='''
import torch

torch.backends.cudnn.deterministic = True
''',
        after='''
import torch

torch.use_deterministic_algorithms(True)
''',
    ),
    _rule(
        TF32_FLAGS, "tf32-flags", "TF32 / reduced-precision matmul flags",
        detects="torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, "
                "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction, ...",
        why="CUDA-only switches: other backends keep their own matmul precision (TF32 is not "
            "supported on ROCm), so numerics and speed differ silently.",
        severity=on_targets("info"),
        replacement='torch.set_float32_matmul_precision("high") (TorchTPU maps it to its '
                    'precision levels); the fp32_precision API (2.9)',
        min_torch=None, fixable=False, effort="low", sources="L05",
        before='''
import torch

torch.backends.cuda.matmul.allow_tf32 = True
''',
        after='''
import torch

torch.set_float32_matmul_precision("high")
''',
    ),
    _rule(
        CUDA_SDP_KERNEL, "cuda-sdp-kernel", "CUDA attention-kernel switches",
        detects="torch.backends.cuda.sdp_kernel, enable_flash_sdp, enable_mem_efficient_sdp, "
                "enable_math_sdp, enable_cudnn_sdp and their *_enabled queries.",
        why="Select CUDA attention kernels; elsewhere ignored. sdp_kernel is deprecated (2.4).",
        severity=on_targets("info"),
        replacement="torch.nn.attention.sdpa_kernel(...) context manager",
        min_torch=None, fixable=False, effort="low", sources="L19",
        before='''
import torch

torch.backends.cuda.enable_flash_sdp(True)
''',
        after='''
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    pass
''',
    ),
    _rule(
        INDUCTOR_COMPILE_BACKEND, "inductor-compile-backend", 'torch.compile with backend="inductor" spelt out',
        detects='torch.compile(..., backend="inductor") with the backend as a string literal.',
        why="Inductor is the default backend where it exists, so naming it changes nothing on CUDA "
            "but pins it everywhere: TorchTPU raises a RuntimeError for TPU inputs under inductor "
            "(unless options={'tpu_backend': 'pallas'}) and picks its own 'tpu' backend only when "
            "no backend is given; torch_xla compiles through 'openxla' and TorchNeuron through "
            "'neuron'.",
        severity=on_targets(None, tpu="error", xla="perf", trainium="perf"),
        replacement="torch.compile(model) without backend=: inductor on CUDA, ROCm, XPU, MPS and CPU, "
                    "'tpu' on TorchTPU; backend='openxla' / 'neuron' where torch_xla / TorchNeuron "
                    "is the target",
        min_torch=None, fixable=True, effort="low", sources="L27",
        before='''
import torch

model = torch.compile(torch.nn.Linear(2, 2), backend="inductor", mode="max-autotune")
''',
        after='''
import torch

model = torch.compile(torch.nn.Linear(2, 2), mode="max-autotune")
''',
    ),
    # -- TP4xx: distributed, data loading, environment --------------------------------------
    _rule(
        NCCL_BACKEND, "nccl-backend", "NCCL process-group backend",
        detects='init_process_group("nccl") / backend="nccl" / new_group(backend="nccl"), '
                'comparisons with "nccl", dist.Backend.NCCL.',
        why="NCCL exists only on NVIDIA (ROCm ships it as RCCL): TorchTPU uses 'tpu_dist', "
            "torch_xla 'xla', TorchNeuron 'neuron', XPU 'xccl', CPU and MPS 'gloo'.",
        severity=on_targets("error", rocm=None),
        replacement="dist.get_default_backend_for_device(device) (torch 2.6), or "
                    "init_process_group(device_id=...) without a backend",
        min_torch="2.6", fixable=True, effort="low", sources="L13",
        before='''
import torch.distributed as dist

dist.init_process_group("nccl")
''',
        after=f'''
import torch.distributed as dist
import torch

{DEVICE_LINE_EXAMPLE}

dist.init_process_group(torch.distributed.get_default_backend_for_device(ACCELERATOR_DEVICE))
''',
    ),
    _rule(
        PIN_MEMORY, "pin-memory", "Pinned host memory",
        detects="pin_memory=True, pin_memory_device=..., tensor.pin_memory().",
        why="From torch 2.7 the DataLoader pins for the current accelerator; it warns and "
            "pins nothing without one, is forced off on MPS, and pin_memory_device is "
            "deprecated (2.9). On torch_xla, MpDeviceLoader does the host-to-device overlap.",
        severity=on_targets("info", rocm=None),
        replacement="pin_memory=torch.accelerator.is_available() on torch>=2.7, drop "
                    "pin_memory_device; "
                    "torch_xla: torch_xla.distributed.parallel_loader.MpDeviceLoader",
        min_torch="2.7", fixable=False, effort="low", sources="L11",
        before='''
from torch.utils.data import DataLoader

loader = DataLoader(data, pin_memory=True, pin_memory_device="cuda")
''',
        after='''
import torch
from torch.utils.data import DataLoader

# torch>=2.7 pins for the current accelerator; pin only when there is one.
loader = DataLoader(data, pin_memory=torch.accelerator.is_available())
''',
    ),
    _rule(
        NON_BLOCKING_COPY, "non-blocking-copy", "non_blocking=True copy to the host",
        detects='non_blocking=True on a copy to the host (.to("cpu", non_blocking=True)); '
                "host-to-device non-blocking copies are portable and not reported.",
        why="A non-blocking device-to-host copy read before a synchronize is a race on "
            "some backends; on lazy torch_xla it is meaningless.",
        severity=on_targets("info", rocm=None, cpu=None),
        replacement="synchronize (torch.accelerator.synchronize) before reading the copied "
                    "values, or copy with non_blocking=False",
        min_torch=None, fixable=False, effort="low", sources="L12",
        before='''
loss_value = loss.to("cpu", non_blocking=True)
''',
        after='''
loss_value = loss.to("cpu")
''',
    ),
    _rule(
        CUDA_VISIBLE_DEVICES, "cuda-visible-devices", "CUDA_VISIBLE_DEVICES",  # torchport: ignore
        detects="the CUDA_VISIBLE_DEVICES variable in Python, shell scripts, Dockerfiles, "
                "Makefiles and YAML.",
        why="Other runtimes ignore it, so device masking silently stops working: Trainium "
            "uses NEURON_RT_VISIBLE_CORES, torch_xla TPU_VISIBLE_CHIPS, Intel "
            "ZE_AFFINITY_MASK (ROCm honours it).",
        severity=on_targets("silent", rocm=None, mps=None, cpu=None),
        replacement="the target's own variable, or select devices in code",
        min_torch=None, fixable=False, effort="low", sources="L22",
        before='''
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "0"
''',
        after='''
import os

os.environ["NEURON_RT_VISIBLE_CORES"] = "0"
''',
    ),
    # -- TP5xx: native code and kernels ------------------------------------------------------------
    _rule(
        CUDA_EXTENSION_BUILD, "cuda-extension-build", "CUDA C++ extension build",
        detects="torch.utils.cpp_extension.CUDAExtension, CUDA_HOME, load()/load_inline() "
                "with .cu sources, cuda_sources= or extra_cuda_cflags=.",
        why="The extension compiles only with nvcc. ROCm hipifies it automatically; every "
            "other target needs a rewrite: SYCL (SyclExtension, 2.7) on XPU, Pallas on "
            "TPU, NKI on Trainium, Metal (torch.mps.compile_shader) on MPS.",
        severity=on_targets("error", rocm="info"),
        replacement="wrap the kernel in torch.library.custom_op (2.4) with a pure-PyTorch "
                    "fallback; port per target",
        min_torch="2.4", fixable=False, effort="high", sources="L16",
        before='''
from torch.utils.cpp_extension import CUDAExtension

ext = CUDAExtension("fused", ["fused.cpp", "fused_kernel.cu"])
''',
        after='''
from torch.utils.cpp_extension import CppExtension

ext = CppExtension("fused", ["fused.cpp"])
''',
    ),
    _rule(
        CUDA_SOURCE_FILE, "cuda-source-file", "CUDA source file",
        detects=".cu and .cuh files, and C/C++ files that include CUDA headers "
                "(cuda_runtime.h, ATen/cuda/..., c10/cuda/...).",
        why="CUDA kernels run only on NVIDIA (ROCm after hipify).",
        severity=on_targets("error", rocm="info"),
        replacement="a kernel per target behind torch.library.custom_op, or plain PyTorch "
                    "ops that torch.compile can fuse",
        min_torch=None, fixable=False, effort="high", sources="L16",
        before='''
#include <cuda_runtime.h>
''',
        after='''
#include <torch/extension.h>
''',
    ),
    _rule(
        TRITON_KERNEL, "triton-kernel", "Triton kernel",
        detects="imports of triton and functions decorated with @triton.jit / @triton.autotune.",
        why="Triton targets NVIDIA and AMD GPUs (Intel XPU through its own backend, "
            "unverified); TPU, Trainium, MPS and CPU need another kernel.",
        severity=on_targets("error", rocm="info", xpu="info"),
        replacement="torch.library.triton_op (2.6) with an eager fallback, or let "
                    "torch.compile generate kernels",
        min_torch="2.6", fixable=False, effort="high", sources="L17",
        before='''
import triton
''',
        after='''
import torch
''',
    ),
    _rule(
        CUDA_EXTENSION_IMPORT, "cuda-extension-import", "Import of a CUDA extension the project builds",
        detects="Python imports of a module that the project builds as a CUDA extension: "
                "the names given to CUDAExtension(...) or to cpp_extension.load() with CUDA "
                "sources in the scanned files or the nearest setup.py above them "
                "(import amp_C, from pkg import _C, from . import _C).",
        why="The module exists only where nvcc built it: the import raises ImportError on every "
            "other target, and on ROCm it exists only if the extension's build hipifies its "
            "sources (see TP505 for code that does not hipify).",
        severity=on_targets("error"),
        replacement="a fallback in pure PyTorch behind torch.library.custom_op, chosen when "
                    "the import fails; port the kernel per target",
        min_torch="2.4", fixable=False, effort="high", sources="L16",
        before='''
from torch.utils.cpp_extension import load

load(name="fused_cuda", sources=["fused.cpp", "fused_kernel.cu"])
import fused_cuda
''',
        after='''
import torch

fused = torch.compile(torch.nn.functional.gelu)
''',
    ),
    _rule(
        NON_HIPIFIABLE_CODE, "non-hipifiable-code", "CUDA code that hipify does not port",
        detects="in .cu/.cuh files: inline PTX assembly (asm volatile / asm(...)); in CUDA and "
                "C++ files: the cuDNN frontend (cudnn_frontend), CUTLASS and CuTe, direct NCCL "
                "point-to-point calls (ncclSend, ncclRecv).",
        why="ROCm builds CUDA extensions by renaming CUDA API calls to HIP (hipify). PTX is "
            "NVIDIA's instruction set, which AMD GPUs do not run; cuDNN's frontend and "
            "CUTLASS/CuTe have no HIP translation; NCCL called from the extension needs RCCL "
            "linked by its own build. On the other targets the file is already a blocker (TP502).",
        severity=on_targets(None, rocm="error"),
        replacement="an AMD path: the equivalent in plain CUDA C++ (which hipifies), MIOpen or "
                    "composable_kernel for cuDNN/CUTLASS, torch.distributed for point-to-point",
        min_torch=None, fixable=False, effort="high", sources="L16",
        before='''
__device__ unsigned lane_id() { unsigned id; asm volatile("mov.u32 %0, %%laneid;" : "=r"(id)); return id; }
''',
        after='''
__device__ unsigned lane_id() { return threadIdx.x % warpSize; }
''',
    ),
    # -- TP6xx: dependencies ------------------------------------------------------------------------
    _rule(
        CUDA_ONLY_PACKAGE, "cuda-only-package", "CUDA-only package",
        detects="imports of and dependencies on apex, flash_attn, xformers, "
                "deepspeed.ops, cupy, pycuda, pynvml, nvidia-*, transformer_engine, "
                "tensorrt, mamba_ssm ...; torch wheels pinned to a CUDA build (+cu121).",
        why="These ship CUDA kernels or talk to the NVIDIA driver; they fail to import or "
            "to install elsewhere. Some have ROCm builds.",
        severity=on_targets("error", rocm="info"),
        replacement="per package: torch.amp and torch.optim.AdamW(fused=True) for apex; "
                    "F.scaled_dot_product_attention for flash_attn and xformers (mind the "
                    "layout); DeepSpeed's accelerator abstraction; ...",
        min_torch=None, fixable=False, effort="medium", sources="L18-L21",
        before='''
from flash_attn import flash_attn_func
''',
        after='''
from torch.nn.functional import scaled_dot_product_attention
''',
    ),
    # -- TP7xx: dtypes ---------------------------------------------------------------------------------
    _rule(
        FLOAT64, "float64", "float64 tensors",
        detects="torch.float64 / torch.double / torch.complex128 / torch.cdouble, "
                "torch.DoubleTensor, .double(). Not on the host: a factory call without "
                "device= or with device='cpu', anything followed by .cpu() / .numpy() / "
                ".tolist() / .item(), and dtypes that are only compared or used as dict keys.",
        why="MPS rejects float64 (TypeError). TPU and Trainium have no fast float64: XLA "
            "emulates it, slowly.",
        severity=on_targets(None, tpu="perf", xla="perf", trainium="perf", mps="error"),
        replacement="float32 (or bfloat16); choose the dtype once next to the device",
        min_torch=None, fixable=False, effort="low", sources="L23",
        before='''
import torch

x = torch.zeros(3, dtype=torch.float64, device=device)
''',
        after='''
import torch

x = torch.zeros(3, dtype=torch.float32, device=device)
''',
    ),
    # -- TP8xx: torch_xla era ---------------------------------------------------------------------------
    _rule(
        DEPRECATED_TORCH_XLA_API, "deprecated-torch-xla-api", "Deprecated torch_xla API",
        detects="xm.xla_device() and xm.mark_step().",
        why="Deprecated in torch_xla: xla_device in favour of torch_xla.device(), mark_step "
            "in favour of torch_xla.sync().",
        severity=on_targets("error", xla="info"),
        replacement="torch_xla.device(), torch_xla.sync(); on TorchTPU torch.accelerator and "
                    "the 'tpu' device",
        min_torch=None, fixable=False, effort="low", sources="L01, section 4",
        before='''
import torch_xla.core.xla_model as xm

device = xm.xla_device()
''',
        after='''
import torch_xla

device = torch_xla.device()
''',
    ),
    _rule(
        TORCH_XLA_API, "torch-xla-api", "torch_xla API (replaced by TorchTPU)",
        detects='imports of torch_xla and "xla" device strings or process-group backends.',
        why="TorchTPU replaces PyTorch/XLA on TPU and TorchNeuron replaces the XLA-based "
            "torch-neuronx on Trainium: both use the eager device API (torch.accelerator), "
            "not xm.*, MpDeviceLoader or xmp.spawn.",
        severity=on_targets("error", xla=None),
        replacement="torch.accelerator for device, sync and memory; torch.compile(backend='tpu') "
                    "on TorchTPU; torchrun instead of xmp.spawn",
        min_torch="2.11", fixable=False, effort="medium", sources="TORCHTPU",
        before='''
import torch_xla
''',
        after='''
import torch
''',
    ),
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}


def rule(rule_id: str) -> Rule:
    return RULES_BY_ID[rule_id]


def matches(rule_id: str, patterns) -> bool:
    """True when a select/ignore entry names the rule or a prefix of it ('TP1', 'ALL')."""
    return any(p == "ALL" or rule_id.startswith(p) for p in patterns)


def finding_severity(finding, target: str) -> str | None:
    """The severity of one finding on a target: its rule's, lowered to the finding's
    cap when the code is guarded (see Finding.severity_cap); None where it is fine (its
    rule's None, or Finding.fine_on)."""
    if target in finding.fine_on:
        return None
    severity = RULES_BY_ID[finding.rule_id].severity[target]
    if severity and finding.raised_to and SEVERITY_RANK[finding.raised_to] > SEVERITY_RANK[severity]:
        severity = finding.raised_to
    cap = finding.severity_cap
    if severity and cap and SEVERITY_RANK[severity] > SEVERITY_RANK[cap]:
        return cap
    return severity


def finding_worst(finding, targets) -> str | None:
    found = [s for t in targets if (s := finding_severity(finding, t))]
    return max(found, key=SEVERITY_RANK.__getitem__) if found else None
