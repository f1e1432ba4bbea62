"""The walk that every rule family shares: name resolution, reporting, and guards.

``AnalyzerCore`` visits a module once.  It resolves names through imports and
simple assignments, records findings, and lowers the severity of findings inside
code that only runs where CUDA (or torch_xla) is present.  What a finding *is*
lives in the rule-family detectors (``devices``, ``cuda_runtime``, ...): each
declares the calls, methods, keywords, imports and strings it handles in class
tables, and ``detectors/__init__.py`` composes them with this core into one
visitor, so a file is still walked once whatever the number of families.

State that several families read (``claimed``, ``host``, ``by_node``) lives here.
"""
from __future__ import annotations

import ast
import bisect
import os
import re
from collections import Counter, defaultdict

from torchport.scan.detectors.dependencies import imports_checked_package
from torchport.scan.detectors.names import CUDA_RENAMES, reference_rule
from torchport.scan.detectors.shared import (
    ADAPTS_BESIDE_A_CPU_TEST,
    ADAPTS_TO_DEVICE,
    BUILD_FACT,
    CUDA_DEVICE,
    GUARDED,
    LISTS_OTHERS,
    OTHER_DEVICE_STRING,
    SKIPPED_TEST,
    is_test_file,
)
from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.model import Fallback, Related, default_of_kind
from torchport.scan.packages import classify_import
from torchport.scan.detectors.syntax import (
    catches_a_missing_module,
    dotted_name,
    forced_when_read,
    forcing_end,
    keyword_value,
    last_name,
    nested_statements,
    parameter_defaults,
    call_site,
    passes_a_value,
    wraps_in_place,
    passes_argument,
    replace_node,
    string_value,
    version_key,
    walk_nodes,
)
from torchport.scan.rules import (
    RULES_BY_ID,
    TRITON_KERNEL,
    CUDA_AUTOCAST,
    CUDA_DEVICE_STRING,
    CUDA_AVAILABILITY_CHECK,
    CUDA_DEVICE_MANAGEMENT,
    CUDA_VISIBLE_DEVICES,
    CUDA_CUSTOM_FWD,
    CUDA_EXTENSION_BUILD,
    CUDA_GRAD_SCALER,
    DEPRECATED_TORCH_XLA_API,
    FLOAT64,
    NCCL_BACKEND,
    TORCH_XLA_API,
    finding_worst,
)

# Markers of code that handles accelerators other than CUDA: a CUDA check in an
# if/elif chain that also has such a branch is dispatch code, not lock-in.
_OTHER_ACCELERATOR_WORDS = {"mps", "xpu", "xla", "tpu", "npu", "hpu", "mlu", "musa", "neuron", "metal", "vulkan",
                            "accelerator", "get_device_module", "torch_xla", "torch_tpu",
                            "xla_model", "current_accelerator"}
_OTHER_ACCELERATOR_CHECK = re.compile(r"is_\w*(?:mps|xpu|xla|tpu|npu|hpu|mlu|musa|neuron)\w*_available")
# Calls whose arguments are messages for people: comparisons and device strings
# inside them are text, not code paths.
_MESSAGE_FUNCTIONS = {"print", "warn", "warning", "info", "debug", "error", "exception", "critical",
                      "log", "fatal", "write", "echo", "secho", "rank_zero_warn", "rank_zero_info",
                      "rank_zero_debug", "rank_print"}
# Positive CUDA checks: the guarded code runs only where CUDA is present.
_CUDA_QUERIES = {"torch.cuda.is_available", "torch.cuda.is_initialized", "torch.cuda.device_count",
                 "torch.cuda.is_bf16_supported", "torch.cuda.is_tf32_supported",
                 "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
                 "torch.cuda.get_device_properties"}
_XLA_GUARDED = "inside a torch_xla check: runs only where torch_xla is installed"
_TYPE_CHECKING = "inside `if TYPE_CHECKING:`: read by type checkers, never run"
# Findings that a torch_xla check, or an old-torch fallback, makes harmless.
_XLA_RULES = (DEPRECATED_TORCH_XLA_API, TORCH_XLA_API)
_AMP_RULES = (CUDA_AUTOCAST, CUDA_GRAD_SCALER, CUDA_CUSTOM_FWD)
# `_TORCH_GREATER_EQUAL_2_4`, `is_torch_version(...)`, and ultralytics-style `TORCH_2_4`
# (true from torch 2.4 on).
_TORCH_VERSION_FLAG = re.compile(r"TORCH\w*(?:GREATER|LESS|_GE_|_LT_|VERSION)|is_torch_version|^_?TORCH_\d+_\d+$", re.I)
_OLD_TORCH = "a fallback for older torch releases"
# `is_cuda_available()`, and NVIDIA hardware checks that are false without CUDA:
# `is_sm_at_least_90()`, `_is_hopper()`, `is_sm100()`.
_CUDA_CHECK_FUNCTION = re.compile(r"_?is_(?:torch_)?cuda_available\Z|_?is_(?:sm_?at_least_?\d+|sm_?\d{2,3}\w*"
                                  r"|hopper|blackwell|ampere)\Z", re.I)
# unittest's and pytest's decorators that skip a test on a condition.
_SKIP_DECORATORS = frozenset({"skipIf", "skipUnless", "skipif"})
# `import torch.cuda.comm`: torch.cuda's modules are Python in every build of torch.
_IMPORT_ONLY = ("the import succeeds in every build of torch, CUDA or not; what fails without CUDA is a call, "
                "reported where it is made")
# A test that never runs, whatever the machine has (not a CUDA guard: its fixes keep their guards).
_SKIPPED_EVERYWHERE = "inside a test skipped on every machine"
# Skip decorators defined in a test helper: `@skip_if_no_cuda()`, `@requires_cuda`,
# `@cuda_only`, `@skip_unless_gpu`.
# `@skip_unless_cuda_available()` (openfold3) names the same test as `@skip_unless_cuda()`.
_CUDA_SKIP_HELPER = re.compile(r"(?:skip_?if_?no_?(?:cuda|gpu)|requires?_?(?:cuda|gpu)|(?:cuda|gpu)_?only"
                               r"|needs?_?(?:cuda|gpu)|skip_?unless_?(?:cuda|gpu)|run_?on_?(?:cuda|gpu))"
                               r"(?:_?(?:is_?)?available)?", re.I)
# The definition of a test decorator named for CUDA (`def withCUDA(func)`, `def requires_cuda(test)`).
_CUDA_TEST_DECORATOR = re.compile(r"(?:with|only|requires?|needs?|skip_?if_?no|skip_?unless|run_?on)_?cuda", re.I)
_DISPATCH = "the check has a branch for other accelerators"
_DISPATCH_DEFAULT = ("the CUDA default of a dispatch whose other branches handle other accelerators "
                     "(is_xpu_available(), is_npu_available(), ...)")
_STATE_DICT = re.compile(r"state_dict|checkpoint|ckpt", re.I)
# Names of flags that say a feature is optional: `fused_available`, `HAS_TRITON`,
# `is_flash_supported()`, `args.use_fused`.
_FEATURE_FLAG = re.compile(r"avail|support|installed|enabled|^has_|^use_|^_?HAS_", re.I)
# `WITH_CUDA_HASH_MAP`, `typing.WITH_PYG_LIB`: a constant saying an optional build is present.
_BUILT_WITH_FLAG = re.compile(r"_?WITH_[A-Z0-9_]+")
_LAZY_CALL = "inside a torch.cuda._lazy_call callback: queued, and run only once CUDA initialises"
_REPORTED_IN_BRANCH = "the branch taken without CUDA has its own finding, which names the consequence"
# Flags and config values that opt into an NVIDIA-only feature: CUDA graphs, NCCL user
# buffers, SHARP, NVSHMEM, NVLS multimem, apex AMP.  `if self.nccl_ub:`,
# `if config.cuda_graph_impl == "local":`, `if amp_type == AMP_TYPE.APEX:`.
_NVIDIA_OPT_IN = re.compile(r"nccl_?ub|user_?buffer|(?:^|_)sharp(?:_|$)|nvshmem|cuda_?graph|cudagraph"
                            r"|graphable|nvls|multimem|^apex$|nvtx|tensorrt|transformer_?engine|nvfp4|jetson", re.I)
# A flag that says NVTX can be imported, not that the user asked for it (set after `import
# torch.cuda.nvtx`, which succeeds on a CPU build too, where its calls then raise).
_NVTX_AVAILABLE = re.compile(r"^(?=.*nvtx)(?:_?has_|.*(?:avail|installed|support))", re.I)
_OPT_IN = "an opt-in NVIDIA feature: under an explicit flag or config branch, with a path without it"
_ASSERTED = "after an assert that CUDA is present: runs only where it is"
_OPT_IN_IMPLEMENTATION = ("the implementation of an opt-in NVIDIA feature (CUDA graphs, NVSHMEM, NCCL user "
                          "buffers), named for it: it runs only where the user turns the feature on")
_DECIDES_SKIP = "only decides whether a test is skipped"
_ASSERTS_ONLY = "the check decides only whether an assertion runs (a requirement); it chooses no device"
_FEATURE_GATE = "a feature gate: the feature is already optional, so the code has a path without it"


_CUDA_ENUM_MEMBERS = {"CUDA", "GPU", "MULTI_GPU"}
_ACCELERATOR_GATE = ("the code asks its accelerator abstraction which device it has: a gate for a "
                     "CUDA-only feature in code that runs on the others")
_OPT_IN_FLOAT64 = re.compile(r"double|fp64|float64|high_precision", re.I)
_ROCM_CHECK = "and-ed with torch.version.hip: a check for ROCm, which keeps the 'cuda' device"
_NAMED_QUERY = "the body of a named CUDA check: reported where it is called"
_SAME_CALL = "an argument of a call reported on the same line under the same rule"
_CUDA_METHOD = "the class's own cuda() method: it runs only where its caller asks for CUDA"
_ASKED_FLOAT64 = "float64 is what the user asked for (a double-precision option or plugin)"
_SELECTS_DEVICE = re.compile(r"_?(?:select|parse|choose|pick|resolve|get)_?(?:torch_)?devices?", re.I)
_SELECTS_DEVICE_REASON = ("a device-selection helper with branches for other accelerators: numeric ids are CUDA "
                          "ids, so this query serves CUDA requests only")
_OTHER_RUNTIMES = {"onnxruntime", "paddle", "openvino", "tensorrt", "ncnn", "MNN", "tflite_runtime", "rknnlite"}
_OTHER_RUNTIME_NAME = re.compile(r"(?:onnxruntime|paddlepaddle|openvino|tensorrt|ncnn)\b")
_EXPORT_CONTEXT = re.compile(r"export|backend|runtime|onnx|paddle|openvino|tensorrt|infer", re.I)
_OTHER_RUNTIME = ("chooses the GPU build or execution provider of another inference runtime (ONNX Runtime, "
                  "PaddlePaddle, ...), whose CPU provider is the fallback; no torch device is chosen")
_NOT_GLOO = ("the branch for NCCL-style backends: the code has a gloo branch for runs without CUDA, "
             "and the NCCL backend is reported where it is chosen")
_CONVERTS_TO_FLOAT64 = re.compile(r"_?(?:to|as|cast_to|convert_to)_?(?:double|float64|fp64)(?:_?tensor)?", re.I)
_DISTRIBUTED_ONLY = ("runs only in a multi-process torch.distributed run (after `if not dist.is_initialized(): "
                     "return`), and no torch.distributed backend takes MPS tensors")
_ANNOTATION = "a type annotation: read by type checkers, never run"
_EXPLICIT_ERROR = "not silent: where CUDA is absent the code raises an explicit error"
# What a failed probe raises: anything, or a missing tool (`nvidia-smi` not installed).
_PROBE_FAILURES = {"Exception", "BaseException", "RuntimeError", "OSError", "FileNotFoundError",
                   "CalledProcessError", "SubprocessError"}
_WARNS_AND_SKIPS = "not silent: where CUDA is absent the code warns that it skips this step"
_HOUSEKEEPING_CALLS = {"torch.cuda.empty_cache", "torch.cuda.ipc_collect", "gc.collect"}
_HOUSEKEEPING = "gates memory housekeeping only (releasing cached memory changes no result)"
# `_update_timing_cache`, `autotune`, `choose_kernel`: a function that times candidates to pick one
_CHOOSES_KERNEL = re.compile(r"tun(?:e|ing)|timing_cache|choose|pick|(?:select|best)_?(?:kernel|impl|algo|config)",
                             re.I)
_KERNEL_TIMING = ("a sync around a timing that only chooses between kernels (performance): every candidate "
                  "gives the same result")
_TYPE_NAME_ONLY = "only the device's type name is read; building torch.device(\"cuda\") does not raise"
_MESSAGE_TEXT = "diagnostics only: the value is shown in the text of an error message"
_DIAGNOSTICS = "gates diagnostics only (memory statistics, profiling, logging, thread counts)"
_BUILD_CHECK = "a build-time check of the CUDA toolkit or device for a CUDA extension"
# Names of diagnostics: memory statistics, profiling, thread counts.  A CUDA check that
# gates only these changes what is measured or logged, never what is computed.
_DIAGNOSTIC_NAME = re.compile(r"profil|memory_(?:stats|history|snapshot|summary|usage|allocated|reserved)"
                              r"|_record_memory|peak_mem|max_memory|reset_peak|memory_stats|log_\w*mem"
                              r"|(?:^|_)threads?(?:_|$)|mem_stats|memory_info|affinity|numa|elapsed|timeit|(?:^|_)timer"
                              r"|system_?info|env(?:ironment)?_?(?:info|description|report)|collect_?env|gpu_?usage", re.I)
# Classes and functions that build or check a CUDA extension.
_IMPLEMENTATION = ("the {} implementation of an abstraction (a class or backend folder named for it): "
                   "it runs only where that backend is chosen")
_ACCELERATOR_TOKENS = {"cuda", "hpu", "xpu", "mps", "npu", "mlu", "musa", "neuron", "xla", "tpu", "ascend"}
_NAME_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z]|_|\d|$)|[A-Z]?[a-z]+|[A-Z]+")
# Bases that are no abstraction with per-device implementations.
_PLAIN_BASES = {"", "object", "TestCase", "Module", "Enum", "Exception", "RuntimeError", "ValueError"}
# Helpers that choose a dtype for a device: `maybe_adjust_dtype_for_device`, `dtype_for_device`.
_DTYPE_FOR_DEVICE = re.compile(r"dtype_for_device|adjust\w*dtype|supported_dtype|device_dtype|dtype_on_device", re.I)
_BUILDER = re.compile(r"Builder|Extension|is_compatible|compatib|cuda_version|installed_cuda", re.I)


def _is_skip(statement) -> bool:
    """``pytest.skip(...)``, ``self.skipTest(...)``: the test stops here; in a skip
    decorator, ``return unittest.skip("needs CUDA")(test_case)``."""
    if not (isinstance(statement, (ast.Expr, ast.Return)) and isinstance(statement.value, ast.Call)):
        return False
    func = statement.value.func
    if isinstance(statement, ast.Return):
        if not isinstance(func, ast.Call):
            return False
        func = func.func  # unittest.skip(...)(test_case)
    return last_name(func) in ("skip", "skipTest")


def _exits_unless_distributed(test) -> bool:
    """``if RANK == -1 or not dist.is_initialized():`` (the test of an early exit): what
    follows runs only in a multi-process distributed run."""
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    return any(isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and isinstance(t.operand, ast.Call)
               and isinstance(t.operand.func, ast.Attribute) and t.operand.func.attr == "is_initialized"
               and getattr(t.operand.func.value, "id", getattr(t.operand.func.value, "attr", "")) in (
                   "dist", "distributed")
               for t in tests)


def _loads_other_runtime(statement) -> bool:
    """The statement imports, or requires by name, an inference runtime other than torch
    (ONNX Runtime, PaddlePaddle, OpenVINO, TensorRT...): a CUDA check beside it picks that
    runtime's GPU build or execution provider, whose CPU one is the fallback."""
    for node in walk_nodes(statement):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in _OTHER_RUNTIMES for m in modules):
                return True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _OTHER_RUNTIME_NAME.match(node.value):
            return True
    return False


def _names_tensorrt(statement) -> bool:
    return any("tensorrt" in (getattr(n, "id", None) or getattr(n, "attr", None) or str(getattr(n, "value", ""))).lower()
               for n in walk_nodes(statement) if isinstance(n, (ast.Name, ast.Attribute, ast.Constant)))


def _gloo_test(test) -> bool | None:
    """``backend == "gloo"`` -> True, ``backend != "gloo"`` or ``not backend == "gloo"`` ->
    False (the body is the non-gloo branch), None for other tests."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if negated:
        test = test.operand
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and "gloo" in (string_value(test.left), string_value(test.comparators[0]))):
        return None
    if isinstance(test.ops[0], (ast.Eq, ast.Is)):
        return not negated
    if isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
        return negated
    return None


def _raises(statements) -> bool:
    """The block ends in ``raise`` (an explicit error)."""
    return bool(statements) and isinstance(statements[-1], ast.Raise)


_PER_DEVICE_CALL = 'one of the same calls made per device ("{}" beside it)'
_TEST_CLASS = re.compile(r"Test(?![a-z])|.*Tests?\Z")
# CUDA queries that answer where CUDA is absent (False, 0) rather than raise.
_SAFE_CUDA_QUERIES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})


def _asserts_only(statements: list) -> bool:
    """``assert mmcv_version >= (1, 4, 4)``: statements that only assert a requirement (or pass);
    ``assert False, "CUDA is required"`` refuses, and is not one."""
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Assert) and not (
        isinstance(s.test, ast.Constant) and not s.test.value)) for s in statements)


def _defines_only_tests(body: list) -> bool:
    """Only test functions (``def test_...``), as a test class defines them, or an
    ``if`` that defines only such functions."""
    return bool(body) and all(
        (isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name.startswith("test_"))
        or (isinstance(statement, ast.If) and _defines_only_tests(statement.body)
            and (not statement.orelse or _defines_only_tests(statement.orelse)))
        for statement in body)


# Calls that take an empty iterable and answer: a comprehension over no CUDA device is fine there.
_TAKES_EMPTY = frozenset({"any", "all", "sum"})


# A flag whose name says a GPU is there (`has_torch_cuda_gpu`, `HAS_CUDA`), and a skip reason that
# says what the test needs ("needs a GPU", "CUDA required").
_GPU_FLAG_NAME = re.compile(r"cuda|gpu", re.IGNORECASE)
_GPU_REASON = re.compile(r"\b(cuda|gpus?)\b", re.IGNORECASE)


def _skips_for_a_named_gpu(decorator: ast.Call, condition: ast.expr, negated: bool) -> bool:
    """``@pytest.mark.skipif(not has_torch_cuda_gpu, reason="needs a GPU")`` (or ``skipUnless(
    HAS_CUDA, "CUDA required")``): the flag is imported from elsewhere, but its name and the
    author's reason both say the test runs only with a GPU."""
    if negated:
        if not (isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not)):
            return False
        condition = condition.operand
    if not isinstance(condition, (ast.Name, ast.Attribute)) or not _GPU_FLAG_NAME.search(last_name(condition)):
        return False
    reason = keyword_value(decorator, "reason") or keyword_value(decorator, "msg") or (
        decorator.args[1] if len(decorator.args) > 1 else None)
    text = string_value(reason) if reason is not None else None
    return text is not None and _GPU_REASON.search(text) is not None


def _negative_number(node) -> bool:
    return (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float)) and node.operand.value > 0)


def _registers_autocast_only(definition) -> bool:
    """A function whose own statements (not the kernels it defines) only register a kernel under
    an autocast dispatch key (``torch.library.impl(op, "Autocast" + device_type.upper())``): it
    makes no tensor and moves nothing."""
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    own: list[ast.AST] = []
    pending: list[ast.AST] = list(definition.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending.extend(node.decorator_list)  # the kernel's body runs only for its dispatch key
            continue
        own.append(node)
        pending.extend(ast.iter_child_nodes(node))
    calls = [n for n in own if isinstance(n, ast.Call)]
    registrations = [c for c in calls if last_name(c.func) in _REGISTRATIONS]
    return bool(registrations) and all(last_name(c.func) in _REGISTRATIONS or last_name(c.func) in _STRING_METHODS
                                       for c in calls) and any(
        "Autocast" in (string_value(n) or "") for c in registrations for n in walk_nodes(c) if isinstance(n, ast.Constant))


_REGISTRATIONS = frozenset({"impl", "register_kernel", "register_autocast"})
_STRING_METHODS = frozenset({"upper", "lower", "capitalize", "format"})


def _built_harmlessly(arguments: list, qualname):
    """The arguments (or entries of a tuple or list argument) that build nothing on a
    device: a device name, a ``torch.device``, a lambda."""
    for argument in arguments:
        if isinstance(argument, (ast.Tuple, ast.List)):
            yield from _built_harmlessly(argument.elts, qualname)
        elif (isinstance(argument, ast.Lambda) or string_value(argument) is not None
              or (isinstance(argument, ast.Call) and qualname(argument.func) == "torch.device"
                  and all(isinstance(part, (ast.Constant, ast.Name))
                          for part in (*argument.args, *(k.value for k in argument.keywords))))):
            yield argument


def _opt_in_feature_named(name: str) -> bool:
    """``create_cuda_graphs``, ``CudaGraphManager``, ``NvshmemCopyService``, ``register_nccl_ub``,
    ``to_tensorrt``, ``TransformerEnginePrecision``."""
    flat = name.lower().replace("_", "")
    return any(word in flat for word in ("cudagraph", "nvshmem", "ncclub", "userbuffer", "tensorrt",
                                         "transformerengine", "nvtx", "nvfp4"))


def _names_in(node) -> list[str]:
    return [n.id if isinstance(n, ast.Name) else n.attr for n in walk_nodes(node)
            if isinstance(n, (ast.Name, ast.Attribute))]


def _accelerator_named(name: str) -> str | None:
    """``CUDA_Accelerator`` -> "cuda", ``HpuBackend`` -> "hpu", ``XLAFSDPStrategy`` -> "xla":
    the device a name is for (an acronym run may start with it)."""
    for token in _NAME_TOKEN.findall(name):
        lowered = token.lower()
        if lowered in _ACCELERATOR_TOKENS:
            return lowered
        if token.isupper() and (device := next((a for a in _ACCELERATOR_TOKENS if lowered.startswith(a)), None)):
            return device
    return None


def _called_implicitly(name: str) -> bool:
    """``forward`` and dunders other than ``__init__``: run by ``module(x)``, ``a + b``, never by name."""
    return name == "forward" or (name.startswith("__") and name != "__init__")


def _implementation_class(node: ast.ClassDef) -> str | None:
    """``class CUDA_Accelerator(DeepSpeedAccelerator)``, ``class XLAStrategy(DDPStrategy)``:
    the device of a class named for one that implements a base not named for one."""
    device = _accelerator_named(node.name)
    bases = [str(getattr(b, "id", None) or getattr(b, "attr", "")) for b in node.bases]
    if device and any(base not in _PLAIN_BASES and _accelerator_named(base) is None for base in bases):
        return device
    return None


# Words a string names a device or a device's collective backend by (its text before a ":").
_DEVICE_WORDS = frozenset({"cpu", "cuda", "gpu", "mps", "xpu", "hpu", "npu", "xla", "tpu", "meta", "mtia",
                           "nccl", "gloo", "hccl", "xccl", "ccl", "mpi"})
# Calls and keywords that place work on a device or choose how devices talk.
_PLACING_CALLS = frozenset({"device", "cuda", "to", "cpu", "set_device", "set_default_device",
                            "set_default_tensor_type", "init_process_group"})
_PLACING_KEYWORDS = frozenset({"device", "map_location", "device_map", "backend", "device_type", "device_ids"})
# Calls that choose an implementation (an import, a compiled extension) or end the program.
_CHOOSING_CALLS = frozenset({"import_module", "__import__", "load", "load_inline", "load_library", "CDLL",
                             "LoadLibrary", "exit", "_exit", "quit", "abort"})
# Calls that store a flag or a count given as a constant: `parser.set_defaults(fp16=False)`.
_SETTING_CALLS = frozenset({"setattr", "set_defaults", "update", "setdefault"})
# Parts of a name that say it holds or handles a device: `GPU`, `move_to_cuda`, `opts.gpu`.
# (`cuda_version`, read beside `torch.version.cuda`, is not one.)
_DEVICE_NAME = re.compile(r"gpu|device|accelerat|cuda(?!_?ver)", re.I)
# Calls that print or record their argument as it is, None included (not `file.write`, `"{:>10}".format`
# or `"+".join`, which fail on None).
_PRINTING_CALLS = frozenset({"print", "str", "repr", "debug", "info", "warning", "warn", "error",
                             "critical", "exception", "log", "echo", "append", "add_row"})
# Literal parts of an f-string that make it a path or an address, not a message: `f"_C_cu{v}.so"`.
_PATH_TEXT = re.compile(r"\.(?:so|dll|pyd|dylib|whl|pt|bin)\b|[/\\]")


# `flag = ... or not torch.cuda.is_available()`, `no_cuda = (... or torch.cuda.device_count() == 0)`:
# the names a statement may force on without CUDA (syntax.forcing_end reads the statement), found in the
# text: the stored name and its line, or the next three after a line ending in `(`.
_FORCING = re.compile(r"^[ \t]*(\w+)[ \t]*=(?!=)([^\n]*\([ \t]*\n(?:[^\n]*\n?){0,3}|[^\n]*)",
                      re.MULTILINE)
_FORCED_ON = re.compile(r"(?:\bor\s+|^\s*\(?\s*)(?:not\s+\(?\s*[\w.]*is_available\("
                        r"|\(?\s*[\w.]*device_count\(\)\s*(?:==\s*0|<\s*\d|<=\s*0))")


def _other_choice(node) -> bool:
    """``"cpu"``, ``"mps"``, ``"auto"``, ``"gloo"``: a listed choice that CUDA's absence may take."""
    value = string_value(node)
    return value is not None and (bool(OTHER_DEVICE_STRING.match(value)) or value in ("auto", "gloo", "mpi", "ucc"))


def _positive_number(node) -> bool:
    """``1`` of ``torch.cuda.device_count() == 1``: a count no CUDA-less machine has."""
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 1


def _holds_at_zero(op, right) -> bool:
    """``>= 0``, ``> -1``, ``!= 1``, ``!= True``, ``is not True``: a comparison that a count of 0 (or
    a false flag) passes, so it holds without CUDA too."""
    bound = right.value if isinstance(right, ast.Constant) else None
    if (isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and isinstance(right.operand, ast.Constant)
            and type(right.operand.value) is int):
        bound = -right.operand.value
    if not isinstance(bound, int):  # a bool is an int: `flag != True` holds where the flag is False
        return False
    return (isinstance(op, ast.Gt) and bound < 0) or (isinstance(op, ast.GtE) and bound <= 0) or (
        isinstance(op, ast.NotEq) and bound != 0) or (isinstance(op, ast.IsNot) and bound is True)


def _cpu_string(node) -> bool:
    """``"cpu"`` or ``"cpu:0"``."""
    return (string_value(node) or "").split(":")[0] == "cpu"


def _mentions_cpu(statement) -> bool:
    """The statement holds a ``"cpu"`` string or a ``.cpu()`` call, compared with or not."""
    for node in walk_nodes(statement):
        if _cpu_string(node):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cpu":
            return True
    return False


def _variables_in(node) -> set[str]:
    """The values an expression reads, as dotted paths without a trailing ``.device`` or ``.type``,
    not the functions it calls (``str(target.type)``: ``target``; ``self.batch.device.type``:
    ``self.batch``, another value than ``self.device``)."""
    found: set[str] = set()
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        path = re.split(r"[\[(]", ast.unparse(node))[0]  # `self.devices[0].type`: `self.devices`
        while path.endswith((".device", ".type")):
            path = path.rsplit(".", 1)[0]
        return {path}
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Call) and child is node.func:
            if isinstance(child, ast.Attribute):  # `target.lower()` reads `target`
                found |= _variables_in(child.value)
            continue
        found |= _variables_in(child)
    return found


def _compared(nodes: list[ast.AST]) -> tuple[set[int], set[str]]:
    """The ids of the nodes a comparison only tests (its operands, and the elements of a tuple,
    list or set it tests membership in), and the variables a comparison tests against the
    CPU (``target == "cpu"``, ``target.type in ("cpu",)``, ``str(target) != "cpu"``).  A
    comparison with ``"cpu"`` counts as a test only in an ``and`` that also tests for CUDA,
    or where it excludes the CPU (``!=``, ``not in``)."""
    tested: set[int] = set()
    against_cpu: set[str] = set()
    # The comparisons in an `and` that also tests for CUDA (`device.type == "cuda" and
    # tensor.device.type == "cpu"`): the "cpu" there picks a way onto CUDA, not a device.
    in_and = {id(v) for n in nodes if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.And)
              and any(_tests_for_cuda(other) for other in n.values) for v in n.values}
    for node in nodes:
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        elements = {id(operand): operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                    for operand in operands}
        cpu = {key for key, each in elements.items() if any(map(_cpu_string, each))}
        excludes_cpu = all(isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)) for op in node.ops)
        if cpu and id(node) not in in_and and not excludes_cpu:
            # `if x.is_cuda: ... elif x.device.type == "cpu": ...`: a branch for the CPU of its
            # own, which leaves the other devices without one, not a side test of a fast path
            continue
        for key, each in elements.items():
            tested.add(key)
            tested.update(map(id, each))
        if cpu:
            against_cpu.update(*(_variables_in(o) for o in operands if id(o) not in cpu))
    return tested, against_cpu


def _tests_for_cuda(test) -> bool:
    """``x.is_cuda``, ``device.type == "cuda"``, ``"cuda" in str(x.device)``."""
    return any((isinstance(node, ast.Attribute) and node.attr == "is_cuda")
               or (isinstance(node, ast.Compare) and any(CUDA_DEVICE.match(string_value(side) or "")
                                                         for side in (node.left, *node.comparators)))
               for node in walk_nodes(test))


def _placement_names(nodes: list[ast.AST]) -> set[str]:
    """The variables the statement places work on a device by: ``x.to(target)``,
    ``torch.device(target)``, ``empty_like(x, device=target)``."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Call):
            if last_name(node.func) in ("to", "device", "cuda"):
                found.update(*(_variables_in(a) for a in node.args))
            found.update(*(_variables_in(k.value) for k in node.keywords if k.arg in _PLACING_KEYWORDS))
    return found


def _placed_devices(statement) -> set[str]:
    """The device words the statement places something on: each string's text before a ``:``,
    ``"cpu"`` for ``x.cpu()``.  A string it only compares with (``if q.device.type == "cpu"
    and ...:``, ``x.device.type in ("cpu", "mps")``) tests the device it was given and places
    nothing there, unless the statement also places work by a variable it compared with the
    CPU (``if x.is_cuda and target == "cpu": x = x.to(target)``), which may be the CPU."""
    nodes = list(walk_nodes(statement))
    tested, against_cpu = _compared(nodes)
    words = set()
    for node in nodes:
        text = string_value(node)
        if text is not None and id(node) not in tested:
            words.add(text.split(":")[0])
        elif isinstance(node, ast.Call) and last_name(node.func) == "cpu":
            words.add("cpu")
    if against_cpu & _placement_names(nodes):
        words.add("cpu")
    return words


def _falls_back_to_cpu(statement) -> bool:
    """The statement names the CPU as a device: ``"cpu"``, ``torch.device("cpu")``, ``x.cpu()``."""
    return "cpu" in _placed_devices(statement)


def _binds_a_name(statement: ast.If | ast.While) -> bool:
    """The ``if`` or ``while`` gives a name or an attribute a value in its body or ``else``."""
    return any(isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr))
               for block in (statement.body, statement.orelse) for each in block for node in walk_nodes(each))


def _shown_in_message(value: ast.FormattedValue, parents: dict[int, ast.AST]) -> bool:
    """An f-string field that shows a value as it is, None included: no format spec
    (``f"{v:>10}"`` fails on None), in a string that is not a path or an address
    (``f"_C_cu{v}.so"``), not handed to a call that is not a print or a log
    (``os.path.join(here, f"...")``)."""
    text = parents.get(id(value))
    if value.format_spec is not None or not isinstance(text, ast.JoinedStr):
        return False
    if any(_PATH_TEXT.search(part.value) for part in text.values
           if isinstance(part, ast.Constant) and isinstance(part.value, str)):
        return False
    holder = parents.get(id(text))
    if isinstance(holder, ast.keyword):
        holder = parents.get(id(holder))
    return not isinstance(holder, ast.Call) or last_name(holder.func) in _PRINTING_CALLS


def _build_version_node(node) -> bool:
    """``torch.version.cuda`` or a part of it, which names the build, not a device."""
    if isinstance(node, ast.Attribute):
        return (node.attr, last_name(node.value)) in (("cuda", "version"), ("version", "torch"))
    return isinstance(node, ast.Name) and node.id == "torch"


def _names_a_device(statement) -> bool:
    """The statement names a device, a device's backend or a flag, or moves to a device: a
    device word it does not only compare with, a name holding ``device``, ``cuda``, ``gpu``
    (``GPU``, ``move_to_cuda``, ``opts.gpu``), a ``torch.cuda`` call, ``torch.device(...)``,
    ``x.cuda()``, ``x.to(...)``, ``set_device``, ``device=``, ``map_location=``, ``backend=``,
    an import or a loaded library (a choice of implementation), ``True``/``False`` or a number
    stored (a flag or a count set for later, also by ``setattr`` or ``set_defaults``), a
    ``raise``, an ``assert False`` or an exit."""
    if _placed_devices(statement) & _DEVICE_WORDS:
        return True
    for node in walk_nodes(statement):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Raise)):
            return True
        if isinstance(node, ast.Call) and (last_name(node.func) in _PLACING_CALLS | _CHOOSING_CALLS
                                           or any(k.arg in _PLACING_KEYWORDS for k in node.keywords)):
            return True
        if (isinstance(node, (ast.Name, ast.Attribute)) and not _build_version_node(node)
                and _DEVICE_NAME.search(last_name(node))):
            return True
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "torch.cuda":
            return True
        if (isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, (bool, int))):
            return True
        if isinstance(node, ast.Call) and last_name(node.func) in _SETTING_CALLS and any(
                isinstance(v, ast.Constant) and isinstance(v.value, (bool, int))
                for v in (*node.args, *(k.value for k in node.keywords))):
            return True
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Constant) and not node.test.value:
            return True  # `assert False, "a CUDA build is required"`
    return False


def _fallback_test(test: ast.expr, defaults: dict[str, object], negated: bool = False) -> tuple[str, Fallback] | None:
    """The parameter (one of ``defaults``, with its constant default) whose fallback ``test`` is
    true for, and which values are: ``p is None``, ``p == "auto"`` (either way round), ``not p``;
    where ``negated``, the test for the other values (``p is not None``, ``p != "auto"``)."""
    if (not negated and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            and isinstance(test.operand, ast.Name) and test.operand.id in defaults):
        return test.operand.id, Fallback(falsy=True, omitted=not defaults[test.operand.id])
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    operator, left, right = type(test.ops[0]), test.left, test.comparators[0]
    if isinstance(right, ast.Name) and isinstance(left, ast.Constant):
        left, right = right, left
    if not (isinstance(left, ast.Name) and left.id in defaults and isinstance(right, ast.Constant)):
        return None
    sentinel, default = right.value, defaults[left.id]
    identity, equality = (ast.IsNot, ast.NotEq) if negated else (ast.Is, ast.Eq)
    if not ((operator is identity and sentinel is None) or (operator is equality and isinstance(sentinel, str))):
        return None
    return left.id, Fallback(value=sentinel, omitted=default == sentinel)


def _default_fallback(statement: ast.stmt, defaults: dict[str, object]) -> tuple[str, ast.expr, Fallback] | None:
    """(parameter, the value it falls back to, which calls reach it) for ``if p is None: x = V``,
    ``x = p or V`` and ``x = V if p is None else p`` (or ``p if p is not None else V``), and the
    same with a string the function tests for (``if p == "auto": x = V``); ``p`` one of
    ``defaults``, ``x`` any one target (``p`` itself, ``self.device``)."""
    if (isinstance(statement, ast.If) and not statement.orelse and len(statement.body) == 1
            and isinstance(statement.body[0], ast.Assign) and len(statement.body[0].targets) == 1):
        picked = _fallback_test(statement.test, defaults)
        return (picked[0], statement.body[0].value, picked[1]) if picked else None
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return None
    value = statement.value

    def is_parameter(node: ast.expr, name: str) -> bool:
        return isinstance(node, ast.Name) and node.id == name

    if (isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(value.values) == 2
            and isinstance(value.values[0], ast.Name) and value.values[0].id in defaults):
        name = value.values[0].id
        return name, value.values[1], Fallback(falsy=True, omitted=not defaults[name])
    if isinstance(value, ast.IfExp):
        picked = _fallback_test(value.test, defaults)
        if picked and is_parameter(value.orelse, picked[0]):
            return picked[0], value.body, picked[1]
        picked = _fallback_test(value.test, defaults, negated=True)
        if picked and is_parameter(value.body, picked[0]):
            return picked[0], value.orelse, picked[1]
    return None


def _drop_rebound(statement: ast.stmt, candidates: dict[str, object]) -> None:
    """Forget the parameters a statement may bind: a store, ``except ... as``, ``import ... as``, a
    ``def`` or ``class``, a ``match`` capture, a ``global``."""
    for node in walk_nodes(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            candidates.pop(node.id, None)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            candidates.pop(node.name, None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            candidates.pop(node.rest, None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            candidates.pop(node.name, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                candidates.pop((alias.asname or alias.name).split(".")[0], None)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                candidates.pop(name, None)


def _within(finding, node) -> bool:
    """Whether a finding (1-based column) lies inside ``node``'s source span."""
    start, end = (node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0)
    return start <= (finding.line, finding.column - 1) < end


def _reads_name(statements, name: str) -> bool:
    """Whether ``name`` is read anywhere in ``statements`` (``locals()`` reads every name)."""
    for node in (n for statement in statements for n in walk_nodes(statement)):
        if isinstance(node, ast.Name) and (node.id == name or node.id == "locals") and not isinstance(node.ctx, ast.Store):
            return True
    return False


def _module_stem(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")


def _implementation_folder(path: str) -> str | None:
    """``pkg/backends/cuda/ops.py`` -> "cuda" where ``pkg/backends`` also has a folder
    for another device (``cpu/``, ``xpu/``): one implementation of an abstraction."""
    parts = path.replace("\\", "/").split("/")[:-1]
    for index in range(len(parts) - 1, 0, -1):
        name = parts[index].lstrip("_")  # `backends/_ascend` beside `backends/_triton`
        if name not in _ACCELERATOR_TOKENS | {"triton"}:  # backends/triton beside backends/cpu
            continue
        parent = "/".join(parts[:index]) or "/"
        try:
            siblings = {entry.name.lstrip("_") for entry in os.scandir(parent) if entry.is_dir()}
        except OSError:
            return None
        if siblings & (_ACCELERATOR_TOKENS | {"cpu"} | ({"triton"} if name != "triton" else set())) - {name}:
            return name
    return None


def _asks_accelerator(node) -> bool:
    """``get_accelerator().device_name()``, ``torch.accelerator.current_accelerator().type``."""
    return any(isinstance(call, ast.Call) and "accelerator" in (
        last_name(call.func)).lower()
               for call in walk_nodes(node))


def _environment_opt_in(node) -> bool:
    """An environment variable read (``os.getenv(...)``, ``os.environ.get(...)``): the
    user opts in."""
    for call in walk_nodes(node):
        if isinstance(call, ast.Call):
            func = call.func
            name = last_name(func)
            if name == "getenv" or (name == "get" and isinstance(func, ast.Attribute)
                                    and getattr(func.value, "attr", getattr(func.value, "id", "")) == "environ"):
                return True
    return False


def _diagnostic(node) -> bool:
    return any(_DIAGNOSTIC_NAME.search(name) for name in _names_in(node))


def _device_test(finding) -> bool:
    """A test of a device the code was given (``x.is_cuda``, ``device.type == "cuda"``),
    not a query of what the machine has (``torch.cuda.is_available()``, which picks the
    CPU over any other accelerator)."""
    return finding.rule_id == CUDA_AVAILABILITY_CHECK and (
        finding.detail.startswith("comparison with") or finding.detail == ".is_cuda")


def _nccl_member(node) -> bool:
    """``torch.distributed.Backend.NCCL``, ``dist.Backend.NCCL``: the NCCL backend's name."""
    return isinstance(node, ast.Attribute) and node.attr == "NCCL" and getattr(node.value, "attr", "") == "Backend"


# `@property def NAME(self) -> bool: """doc""" return EXPR` (a return first in the body is
# what it returns), read from the text: parsing whole files for every `self.device` would
# cost more than the scan
_PROPERTY_RETURN = re.compile(r"@property\s+def (\w+)\(self\)[^:\n]*:\s+(?:\"\"\"(?:[^\"]|\"(?!\"\"))*\"\"\"\s+)?return ([^\n]+)")

# `use_cuda = use_cuda and torch.cuda.is_available()`, matched at the line break before it (searched
# in the text after a "\n"): re scans for a literal first character fast, while `^` under re.M is
# tried at every character (30% slower here).
_NARROWING = re.compile(r"\n[ \t]*(\w+) = (\w+) and\b")


def _off(value) -> bool:
    """``self.use_cuda = False``: a flag that is off guards nothing that runs."""
    return isinstance(value, ast.Constant) and value.value in (False, None)


def _cuda_enum_member(node) -> bool:
    """``RNGType.CUDA``, ``DistributedType.MULTI_GPU``: an enum member (a capitalised
    class's attribute) that names CUDA; a branch on it runs only in CUDA runs."""
    return (isinstance(node, ast.Attribute) and node.attr in _CUDA_ENUM_MEMBERS
            and isinstance(node.value, (ast.Name, ast.Attribute))
            and (node.value.id if isinstance(node.value, ast.Name) else node.value.attr)[:1].isupper())


def _device_subject(test, other: bool = False) -> str | None:
    """For ``x.type == "cuda"`` (or, with ``other``, ``x.type == "cpu"``/``"mps"``...),
    the compared expression ``x.type`` as a comparable dump; None for other tests."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return None
    pattern = OTHER_DEVICE_STRING if other else CUDA_DEVICE
    for side, subject in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        value = string_value(side)
        if value is not None and pattern.match(value) and string_value(subject) is None:
            return ast.dump(subject)
    return None


# A string that names a device or starts building one ("cuda", "cpu", "cuda:" of f"cuda:{rank}").
_NAMES_A_DEVICE = re.compile(r"(?:cuda|gpu|mps|xpu|xla|tpu|npu|hpu|mlu|musa|neuron|meta|cpu)(?::\d*)?\Z")
# torch.distributed's process-group backends
_NAMES_A_BACKEND = re.compile(r"nccl|gloo|mpi|ucc|xccl|hccl|cncl|mccl")

# The device-generic API that a torch of the last few releases has (torch 2.3 and later): a try that
# imports it fails only on an older torch, so its handler is that torch's fallback.
_GENERIC_TORCH_MODULES = frozenset({"torch.amp", "torch.amp.grad_scaler", "torch.amp.autocast_mode",
                                    "torch.accelerator", "torch.nn.attention"})
_GENERIC_TORCH_NAMES = frozenset({"amp", "accelerator", "autocast", "GradScaler"})


class AnalyzerCore(AnalyzerState):
    # Filled by detectors/__init__.py from the families' tables (see there):
    # qualified name -> handler(self, call, qualname) -> True when the callee was reported.
    # The torch.cuda rename table and the name -> rule lookup, composed from every family.
    cuda_renames = CUDA_RENAMES
    reference_rule = staticmethod(reference_rule)
    call_handlers: dict = {}
    # (predicate on a qualified name, handler), tried after call_handlers.
    call_prefix_handlers: tuple = ()
    method_handlers: dict = {}  # obj.METHOD(...) -> handler(self, call)
    keyword_handlers: dict = {}  # f(KEYWORD=...) -> handler(self, call, keyword, torch_call)
    import_handlers: tuple = ()  # handler(self, node, module) -> True when reported
    string_prefixes: tuple = ()  # every prefix below, for one C-level startswith per literal
    string_handlers: tuple = ()  # (prefix, handler(self, constant, value)) for string literals
    compared_string_handlers: tuple = ()  # handler(self, element, value, lists_others) -> bool
    named_default_handlers: tuple = ()  # (word in the option name, handler(self, default, where))
    assignment_handlers: tuple = ()  # handler(self, name, value)
    attribute_handlers: dict = {}  # attribute name -> handler(self, node) (a dict: most attributes match none)
    call_claims: tuple = ()  # handler(self, call) -> True when the whole call was reported
    call_observers: tuple = ()  # handler(self, call), before a call's own rules run
    function_handlers: tuple = ()  # handler(self, function definition)

    def _named_default(self, name: str, default, where: str) -> None:
        """A default for an option, parameter or field: the family whose word the name
        holds ("device", "backend") checks the value."""
        if default is None:
            return
        lowered = name.lower()
        for word, handler in self.named_default_handlers:
            if word in lowered:
                handler(self, default, where)
                return

    # -- visitors ---------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith("torch.cuda.") or alias.name.startswith("torch.backends.cud"):
                rule_id = reference_rule(alias.name)
                if rule_id:
                    start = len(self.findings)
                    self.report(rule_id, node, f"import {alias.name}")
                    if alias.asname is None:
                        # its uses spell `torch.cuda.`, so the scanner reads and reports them;
                        # an alias's uses may lie where it does not look (another module)
                        self._cap(self.findings[start:], _IMPORT_ONLY)
                continue
            self._imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for module in modules:
                if self._imported(node, module):
                    break

    def _imported(self, node, module: str) -> bool:
        return any(handler(self, node, module) for handler in self.import_handlers)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        qualname = self.qualname(node)
        rule_id = reference_rule(qualname) if qualname else None
        if rule_id:
            if id(node) not in self.claimed and not (rule_id == FLOAT64 and id(node) in self.host):
                self.report(rule_id, node, qualname or "")
            return
        handler = self.attribute_handlers.get(node.attr)
        if handler is not None:
            handler(self, node)
        start = len(self.findings)
        self.generic_visit(node)
        if (node.attr == "type" and isinstance(node.value, ast.Call)
                and self.qualname(node.value.func) == "torch.device"):
            # `torch.device("cuda").type` is the string "cuda": the device is built (which
            # does not raise) only to read its name, typically for a comparison.
            self._cap([f for f in self.findings[start:] if f.rule_id == CUDA_DEVICE_STRING], _TYPE_NAME_ONLY)

    def visit_Name(self, node: ast.Name) -> None:
        qualname = self.qualname(node)
        if qualname and isinstance(node.ctx, ast.Load) and id(node) not in self.claimed:
            rule_id = reference_rule(qualname)
            if rule_id and not (rule_id == FLOAT64 and id(node) in self.host):
                self.report(rule_id, node, f"{node.id} ({qualname})" if node.id != qualname else qualname)

    def visit_Constant(self, node: ast.Constant) -> None:
        if id(node) in self.claimed or not isinstance(node.value, str):
            return
        value = node.value
        if value.startswith(self.string_prefixes):
            for prefix, handler in self.string_handlers:
                if value.startswith(prefix):
                    handler(self, node, value)

    def visit_Dict(self, node: ast.Dict) -> None:
        # Tables name things; they create no tensor and choose no device: dtype tables
        # ({torch.float64: 67e12}) for the float64 family, and `{Backend.NCCL: ["cuda"]}`
        # (what supports what) for the device family.
        for key in node.keys:
            if key is not None:
                self.host.update(map(id, walk_nodes(key)))
        self.table_entries.update(id(v) for v in node.values if isinstance(v, (ast.List, ast.Tuple)))
        keys = [string_value(k) or "" for k in node.keys if k is not None]
        start = len(self.findings)
        self.generic_visit(node)
        if any(CUDA_DEVICE.match(k) for k in keys) and any(OTHER_DEVICE_STRING.match(k) for k in keys):
            # {"cuda": torch.cuda.max_memory_allocated, "xpu": torch.xpu.max_memory_allocated, ...}:
            # a table per device type, of which the CUDA entry is one.
            self._cap(self.findings[start:], "an entry of a table per device type (other devices have theirs)")

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):  # docstrings are prose
            return
        start = len(self.findings)
        self.generic_visit(node)
        other = self._same_call_for_another_device(node)
        if other:
            # `_make_autocast_impl("cuda")` beside `_make_autocast_impl("cpu")`: one registration per device
            self._cap(self.findings[start:], _PER_DEVICE_CALL.format(other))

    def _same_call_for_another_device(self, statement: ast.Expr) -> str | None:
        """The other device of a call made beside this one with the same arguments but for
        that device in place of ``"cuda"``, of a function of this file that only registers an
        autocast kernel for the device it is given: ``_make_autocast_impl("cuda")`` beside
        ``_make_autocast_impl("cpu")`` (an op without an autocast kernel for a device runs there
        as it is; a missing kernel of another kind would fail, and a call that moves or makes
        tensors does)."""
        call = statement.value
        if not isinstance(call, ast.Call) or call.keywords or not isinstance(call.func, ast.Name):
            return None
        places = [i for i, a in enumerate(call.args) if CUDA_DEVICE.match(string_value(a) or "")]
        if len(places) != 1:
            return None
        name = call.func.id
        if name not in self._autocast_registrars:
            self._autocast_registrars[name] = _registers_autocast_only(self.definition(name))
        if not self._autocast_registrars[name]:
            return None
        index = places[0]
        block = self.blocks.get(id(statement))
        if block is None:  # a statement with no siblings
            return None
        if id(block) not in self._calls_by_block:
            self._calls_by_block[id(block)] = [
                (s.value, s.value.func.id, [ast.dump(a) for a in s.value.args]) for s in block
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and not s.value.keywords
                and isinstance(s.value.func, ast.Name)]
        mine = [ast.dump(a) for a in call.args]
        for sibling, function, arguments in self._calls_by_block[id(block)]:
            if sibling is call or function != name or len(arguments) != len(mine):
                continue
            device = string_value(sibling.args[index]) or ""
            if (OTHER_DEVICE_STRING.match(device) and not device.startswith("meta")
                    and all(a == b for i, (a, b) in enumerate(zip(arguments, mine)) if i != index)):
                return device
        return None

    def visit_Compare(self, node: ast.Compare) -> None:
        if self.in_message:  # a comparison printed in a message is text
            self.generic_visit(node)
            return
        start = len(self.findings)
        for operand in [node.left, *node.comparators]:
            elements = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            # `dtype == torch.float64` reads a dtype; it creates no tensor.
            self.host.update(id(e) for e in elements if isinstance(e, (ast.Attribute, ast.Name)))
            lists_others = len(elements) > 1 and any(
                OTHER_DEVICE_STRING.match(string_value(e) or "") for e in elements)
            strings = [string_value(e) for e in elements]
            if len(elements) > 1 and any(v is not None and not CUDA_DEVICE.match(v)
                                         and not OTHER_DEVICE_STRING.match(v) and v not in ("gpu", "auto")
                                         for v in strings):
                continue  # {"contiguous", "cuda", "half"}: method names, not devices
            for element in elements:
                value = string_value(element)
                if value is None or id(element) in self.claimed:
                    continue
                for handler in self.compared_string_handlers:
                    if handler(self, element, value, lists_others):
                        break
        self.generic_visit(node)
        if any(map(_nccl_member, (node.left, *node.comparators))):
            # `get_backend() == Backend.NCCL` reads the backend to choose a branch
            self._cap([f for f in self.findings[start:] if f.rule_id == NCCL_BACKEND],
                      "a comparison only chooses a branch; nothing selects NCCL here")
        if any(_asks_accelerator(side) for side in (node.left, *node.comparators)):
            # `get_accelerator().device_name() == "cuda"`: portable code asking its
            # accelerator abstraction whether a CUDA-only feature applies.
            self._cap([f for f in self.findings[start:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _ACCELERATOR_GATE)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        start = len(self.findings)
        self.generic_visit(node)
        if any(map(_diagnostic, node.targets)) or (self.context_names and _DIAGNOSTIC_NAME.search(
                self.context_names[-1])):  # num_threads = cpu_count() // (n if cuda else 1)
            self._cap([f for f in self.findings[start:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _DIAGNOSTICS)
        checks = [f for f in self.findings[start:] if _device_test(f)]
        if checks and self._flag_beside_other_device(node):
            self._cap(checks, _DISPATCH)
        available = [f for f in self.findings[start:] if f.rule_id == CUDA_AVAILABILITY_CHECK]
        if available and self._availability_beside_other_device(node):
            self._cap(available, _DISPATCH)

    def _availability_beside_other_device(self, node: ast.Assign) -> bool:
        """``with_cuda = torch.cuda.is_available()`` next to ``with_xpu =
        torch.xpu.is_available()``: one availability flag per device, for a dispatch."""
        if not (isinstance(node.value, ast.Call) and self.qualname(node.value.func) in _CUDA_QUERIES):
            return False
        def other_availability(value) -> bool:  # `torch.xpu.is_available() if WITH_IPEX else False`
            if isinstance(value, ast.IfExp):
                return other_availability(value.body)
            return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "is_available" and self._mentions_other_accelerator([value.func.value]))
        return any(sibling is not node and isinstance(sibling, ast.Assign) and other_availability(sibling.value)
                   for sibling in self.blocks.get(id(node), ()))

    def _flag_beside_other_device(self, node: ast.Assign) -> bool:
        """``self.is_cuda = device.type == "cuda" and ...`` next to ``self.is_npu =
        device.type == "npu" and ...``: flags for each device, a dispatch."""
        subjects = {_device_subject(n) for n in walk_nodes(node.value)} - {None}
        if not subjects:
            return False
        for sibling in self.blocks.get(id(node), ()):
            if sibling is not node and isinstance(sibling, ast.Assign) and any(
                    _device_subject(n, other=True) in subjects for n in walk_nodes(sibling.value)):
                return True
        return False

    def visit_Assert(self, node: ast.Assert) -> None:
        start = len(self.findings)
        self.generic_visit(node)
        if node.msg is not None or self.positive_cuda_query(node.test):
            # `assert device.type == "cuda", "GDS needs CUDA"`, `assert torch.cuda.is_available()`:
            # an explicit error (AssertionError) where CUDA is absent, nothing silent
            self._cap([f for f in self.findings[start:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _EXPLICIT_ERROR)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assigned([node.target], node.value)
        self.visit(node.target)
        self._visit_annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def visit_arg(self, node: ast.arg) -> None:
        if node.annotation is not None:
            self._visit_annotation(node.annotation)

    def _visit_annotation(self, annotation) -> None:
        """``stream: torch.cuda.Stream | None``: a type, read by type checkers; the
        name exists on every build and nothing is created."""
        start = len(self.findings)
        self.visit(annotation)
        self._cap(self.findings[start:], _ANNOTATION)

    def _cuda_home_handled(self, tree) -> bool:
        """The file tests ``CUDA_HOME`` (or a name holding it) for None or truth:
        ``if CUDA_HOME is None: ...``, ``if cuda_home: ...``."""
        holders = {"cuda_home"}  # names assigned CUDA_HOME: `home = cpp_extension.CUDA_HOME`
        for node in walk_nodes(tree):
            if isinstance(node, ast.Assign) and any(n.lower() == "cuda_home" for n in _names_in(node.value)):
                holders.update(t.id.lower() for t in node.targets if isinstance(t, ast.Name))
        for node in walk_nodes(tree):
            tests = []
            if isinstance(node, (ast.If, ast.IfExp, ast.While)):
                tests.append(node.test)
            elif isinstance(node, ast.BoolOp):
                tests.extend(node.values)
            for test in tests:
                if isinstance(test, ast.UnaryOp):
                    test = test.operand
                if isinstance(test, ast.Compare) and len(test.comparators) == 1 and isinstance(
                        test.comparators[0], ast.Constant) and test.comparators[0].value is None:
                    test = test.left
                if isinstance(test, (ast.Name, ast.Attribute)) and _names_in(test)[0].lower() in holders:
                    return True
        return False

    def _assigned(self, targets, value) -> None:
        if len(targets) != 1 or not isinstance(targets[0], (ast.Name, ast.Attribute)):
            return
        target = targets[0]
        name = target.id if isinstance(target, ast.Name) else target.attr
        # A dataclass field: `device: str = field(default="cuda")`.
        if isinstance(value, ast.Call) and (self.qualname(value.func) or getattr(value.func, "id", "")) in (
                "dataclasses.field", "field"):
            self._named_default(name, keyword_value(value, "default"), f"default of field {name}")
            return
        for handler in self.assignment_handlers:
            handler(self, name, value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scopes.append(id(node))
        self.class_names.append(node.name)
        if any(str(getattr(b, "id", None) or getattr(b, "attr", "")).endswith("Enum") for b in node.bases):
            # `class RNGType(Enum): CUDA = "cuda"` names a kind; it chooses no device.
            for statement in node.body:
                if isinstance(statement, ast.Assign):
                    self.claimed.add(id(statement.value))
        for child in (*node.bases, *node.keywords, *node.decorator_list):
            self.visit(child)
        body_start = len(self.findings)
        context = [node.name, *(str(getattr(b, "id", None) or getattr(b, "attr", "")) for b in node.bases)]
        self.context_names.extend(context)
        self._visit_body(node.body)
        del self.context_names[-len(context):]
        device = _implementation_class(node)
        if device:  # `class CUDA_Accelerator(DeepSpeedAccelerator)`: chosen only where that device is.
            self._cap(self.findings[body_start:], _IMPLEMENTATION.format(device.upper()))
        if any(map(self.cuda_only_test, node.decorator_list)):
            self._cap(self.findings[body_start:], SKIPPED_TEST)
            # its methods run only with CUDA; its body's own statements run when the module is imported
            self.__dict__.setdefault("cuda_only_spans", []).extend(
                (m.lineno, m.end_lineno or m.lineno) for m in node.body
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
        elif self._class_skipped_everywhere(node):
            # its test methods never run; its body's own statements and other methods may
            for method in node.body:
                if (isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name.startswith("test")
                        and self._spelled_once(method.name)):
                    self._cap([f for f in self.findings[body_start:]
                               if method.body[0].lineno <= f.line <= (method.end_lineno or method.lineno)],
                              _SKIPPED_EVERYWHERE)
        if _opt_in_feature_named(node.name):
            self._cap(self.findings[body_start:], _OPT_IN_IMPLEMENTATION)
        self._cap_asked_float64(node.name, self.findings[body_start:])
        self.class_names.pop()
        self.scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        defaults_start = len(self.findings)
        for handler in self.function_handlers:
            handler(self, node)
        overridden = []  # defaults that every call in this file replaces
        called_elsewhere = []  # defaults whose use the calls in other files decide
        for argument, default in parameter_defaults(node.args):
            start = len(self.findings)
            self._named_default(argument.arg, default, f"default of {argument.arg}")
            reported = len(self.findings) > start or any(
                CUDA_DEVICE.match(string_value(n) or "") for n in walk_nodes(default))
            if reported and self._every_call_passes(node, argument.arg):
                overridden.append((default, f"default only: every call in this file passes {argument.arg}"))
                self._cap(self.findings[start:], overridden[-1][1])
            elif reported and not _reads_name(node.body, argument.arg):
                # `def __init__(self, n_comp=100, device="cuda"): ...` that never reads `device`
                overridden.append((default, f"default only: {argument.arg} is never used"))
                self._cap(self.findings[start:], overridden[-1][1])
            elif reported and (called_as := self._called_elsewhere(node, argument.arg)):
                for finding in self.findings[start:]:
                    finding.default_of = called_as
                called_elsewhere.append((default, called_as))
        for decorator in node.decorator_list:
            self.visit(decorator)
        args_start = len(self.findings)
        self.visit(node.args)  # defaults and annotations belong to the enclosing scope
        self._cap_host_dtype_defaults(node, self.findings[args_start:])
        for default, reason in overridden:  # `device: torch.device = torch.device("cuda")`
            self._cap([f for f in self.findings[args_start:] if _within(f, default)], reason)
        for default, called_as in called_elsewhere:  # the same, found while visiting the arguments
            for finding in self.findings[args_start:]:
                if _within(finding, default) and finding.default_of is None:
                    finding.default_of = called_as
        if node.returns is not None:
            self._visit_annotation(node.returns)
        self.scopes.append(id(node))
        self.class_names.append("")  # a def inside this one is no method
        self.context_names.append(node.name)
        body_start = len(self.findings)
        cuda_only = False  # after `if device.type != "cuda": return`
        xla_only = False  # after `if not _XLA_AVAILABLE: return`
        skipped = False  # after `pytest.importorskip("flash_attn")`
        kernels_optional = False  # after `if not has_triton(): return`
        distributed_only = False  # after `if not dist.is_initialized(): return`
        for statement in node.body:
            start = len(self.findings)
            self.visit(statement)
            if distributed_only:
                self._cap([f for f in self.findings[start:] if f.rule_id == FLOAT64], _DISTRIBUTED_ONLY)
            if kernels_optional:
                self._cap([f for f in self.findings[start:] if f.rule_id == TRITON_KERNEL], _FEATURE_GATE)
            if skipped:
                self._cap(self.findings[start:], SKIPPED_TEST)
            elif cuda_only:
                self._cap(self.findings[start:], GUARDED)
            elif xla_only:
                self._cap([f for f in self.findings[start:] if f.rule_id in _XLA_RULES], _XLA_GUARDED)
            elif self._skips_unless_cuda(statement):
                skipped = True
            if isinstance(statement, ast.Assert) and self.positive_cuda_query(statement.test):
                cuda_only = True  # `assert torch.cuda.is_available()`: what follows runs only with CUDA
            if isinstance(statement, ast.If) and self._else_exits_unless_cuda(statement):
                cuda_only = True  # `if torch.cuda.is_available(): device = "cuda"` / `else: return`
            if isinstance(statement, ast.If) and self._exits(statement):
                cuda_only = cuda_only or self._false_only_with_cuda(statement.test)
                kernels_optional = kernels_optional or (
                    isinstance(statement.test, ast.UnaryOp) and isinstance(statement.test.op, ast.Not)
                    and self._kernel_flag(statement.test.operand))
                distributed_only = distributed_only or _exits_unless_distributed(statement.test)
                xla_only = xla_only or (isinstance(statement.test, ast.UnaryOp) and isinstance(
                    statement.test.op, ast.Not) and self.positive_xla_query(statement.test.operand))
        if any(map(self.cuda_only_test, node.decorator_list)):
            self._cap(self.findings[body_start:], SKIPPED_TEST)
            self.__dict__.setdefault("cuda_only_spans", []).append((node.lineno, node.end_lineno or node.lineno))
        elif self._test_skipped_everywhere(node):  # `@unittest.skip("Needs machine with 4 GPUs")`
            self._cap(self.findings[body_start:], _SKIPPED_EVERYWHERE)
        checks = [f for f in self.findings[body_start:] if f.rule_id == CUDA_AVAILABILITY_CHECK]
        if (checks and any(map(_EXPORT_CONTEXT.search, self.context_names))
                and any(map(_loads_other_runtime, node.body))):
            # `class ONNXBackend: def load_model(...)`: `import onnxruntime`, `check_requirements("paddlepaddle")`
            self._cap(checks, _OTHER_RUNTIME)
        if (len(self.findings) > body_start and _SELECTS_DEVICE.fullmatch(node.name)
                and self._mentions_other_accelerator(node.body)):
            self._cap_cuda_index_queries(node, self.findings[body_start:])
        if len(self.findings) > body_start and _CONVERTS_TO_FLOAT64.fullmatch(node.name):  # `def to_double(x)`
            self._cap([f for f in self.findings[body_start:] if f.rule_id == FLOAT64], _ASKED_FLOAT64)
        statements = node.body[1:] if node.body and string_value(getattr(node.body[0], "value", None)) else node.body
        if _CUDA_CHECK_FUNCTION.match(node.name) and len(statements) == 1 and isinstance(statements[0], ast.Return):
            # `def is_cuda_available(): return torch.cuda.is_available()`: its calls are the checks
            self._cap([f for f in self.findings[body_start:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _NAMED_QUERY)
        if _CUDA_TEST_DECORATOR.fullmatch(node.name.strip("_")):
            # `def withCUDA(func)`, `def requires_cuda(test)`: a test helper named for CUDA;
            # its check decides where the tests it marks run
            self._cap([f for f in self.findings[body_start:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _DECIDES_SKIP)
        if node.name == "cuda" and len(self.class_names) > 1 and self.class_names[-2]:
            # a class's own `def cuda(self, device=None)`: runs only when its caller asks for CUDA
            self._cap(self.findings[body_start:], _CUDA_METHOD)
        if _opt_in_feature_named(node.name):  # `def to_tensorrt(self, default_device="cuda")`
            self._cap(self.findings[defaults_start:], _OPT_IN_IMPLEMENTATION)
        self._cap_after_cuda_exits(node, self.findings[body_start:])
        self._cap_support_flags(node, self.findings[body_start:])
        self.context_names.pop()
        self.class_names.pop()
        self.scopes.pop()
        self._read_none_default_fallbacks(node, self.findings[body_start:])

    visit_AsyncFunctionDef = visit_FunctionDef

    def _read_none_default_fallbacks(self, function, findings) -> None:
        """``def shard(self, module, device=None): if device is None: device = torch.device("cuda")``
        (or ``device = device or "cuda"``, ``if device == "auto": device = pick()``) at the top level
        of the body: that value is the parameter's default in all but name, read as a default is
        (every call in this file keeps away from it; or, called only from other files, those calls
        decide)."""
        # not a flag (`cpu=False`, `if not cpu: model.cuda()`): a run-time switch, not a device default
        candidates: dict[str, object] = {argument.arg: default.value for argument, default
                                         in parameter_defaults(function.args)
                                         if isinstance(default, ast.Constant) and not isinstance(default.value, bool)}
        if not candidates or not findings:
            return
        for statement in function.body:
            found = _default_fallback(statement, candidates)
            if found is None:
                _drop_rebound(statement, candidates)  # rebound first: no longer the argument
                if not candidates:
                    return
                continue
            parameter, value, fallback = found
            inside = [f for f in findings if _within(f, value) and f.severity_cap is None and f.default_of is None]
            if inside and self._every_call_passes_a_value(function, parameter, fallback):
                self._cap(inside, f"default only: every call in this file passes {parameter}")
            elif inside and (called_as := self._called_elsewhere(function, parameter)):
                for finding in inside:
                    finding.default_of = (*called_as[:3], False, called_as[4])  # **kwargs may not hold it
                    finding.default_falls_back = fallback
            candidates.pop(parameter, None)
            _drop_rebound(statement, candidates)  # `if preset == "fast": device = "auto"`
            if not candidates:
                return

    def _every_call_passes_a_value(self, function, parameter: str, fallback: Fallback) -> bool:
        """For a default the function replaces by CUDA: the file calls the function, every call
        keeps away from the ``fallback`` (``passes_a_value``), and the file names the function
        nowhere else: not as a value (a callback, ``functools.partial``), not in a subclass's
        bases, not through its class (``Base.place(obj, x)``, where the slots shift)."""
        _, name, position, calls = self._calls_in_file(function, parameter)
        owner = self.class_names[-1] if self.class_names else ""
        if not calls or any(isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                            and call.func.value.id == owner for call in calls):
            return False
        if any(not wraps_in_place(decorator) for decorator in function.decorator_list):
            return False  # `@register("linear")`: a registry calls it, with what the file does not show
        mentions = len(re.findall(rf"(?<!\w){re.escape(name)}\b", "\n".join(self.lines)))
        if mentions > 1 + len(calls):  # the definition and the calls, nothing else
            return False
        if self._call_site is None:
            if self._whole_tree is None:  # parsed by _calls_in_file's index, unless it does not parse
                return False
            self._call_site = call_site(self._whole_tree)
        return all(passes_a_value(call, parameter, position, self._call_site, fallback) for call in calls)

    def _cap_asked_float64(self, name: str, findings) -> None:
        """``class DoublePrecision``: float64 is what the user asked for."""
        if _OPT_IN_FLOAT64.search(name):
            self._cap([f for f in findings if f.rule_id == FLOAT64], _ASKED_FLOAT64)

    def _cap_cuda_index_queries(self, function, findings) -> None:
        """In ``select_device``/``parse_device`` with branches for MPS, XPU, NPU...: numeric
        device ids are CUDA ids, so ``torch.cuda.device_count()`` and ``CUDA_VISIBLE_DEVICES``
        only serve CUDA requests.  Errors (``set_device``) and statements that fall back
        to the CPU stay reported."""
        targets = RULES_BY_ID[CUDA_DEVICE_MANAGEMENT].severity.keys()
        queries = [f for f in findings if f.rule_id in (CUDA_DEVICE_MANAGEMENT, CUDA_VISIBLE_DEVICES)
                   and finding_worst(f, targets) == "silent"]
        if not queries:
            return
        statements = [s for s in walk_nodes(function) if isinstance(s, ast.stmt) and s is not function
                      and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        for finding in queries:
            around = [s for s in statements if s.lineno <= finding.line <= (s.end_lineno or s.lineno)]
            if around and not _mentions_cpu(min(around, key=lambda s: (s.end_lineno or s.lineno) - s.lineno)):
                self._cap([finding], _SELECTS_DEVICE_REASON)

    def _calls_in_file(self, function, parameter: str) -> tuple[bool, str, int | None, list[ast.Call]]:
        """How this file calls ``function``: whether it is a bound method, the name its calls use
        (the class's for ``__init__``), the position ``parameter`` takes in a call, and the calls
        (a module-level function's only as ``name(...)``: ``torch.is_autocast_enabled()`` is
        another function than this file's ``is_autocast_enabled``)."""
        method = bool(self.class_names and self.class_names[-1]) and not any(
            getattr(d, "id", "") == "staticmethod" for d in function.decorator_list)
        name = self.class_names[-1] if method and function.name == "__init__" else function.name
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        position = positional.index(parameter) - method if parameter in positional else None
        calls = self.calls_named(name)
        if not method:
            calls = [call for call in calls if isinstance(call.func, ast.Name)]
        return method, name, position, calls

    def _every_call_passes(self, function, parameter: str) -> bool:
        """Whether the file calls ``function`` at least once and every call passes
        ``parameter`` (so its default is never used here).  A call with ``*args`` or
        ``**kwargs`` counts as passing it."""
        _, _, position, calls = self._calls_in_file(function, parameter)
        return bool(calls) and all(passes_argument(call, parameter, position) for call in calls)

    def _called_elsewhere(self, function, parameter: str) -> tuple[str, str, int | None, bool, str] | None:
        """For a module-level function, a class's ``__init__`` or a method that this file never
        calls: (the name its callers use, the parameter, its position in their calls, whether
        ``*args``/``**kwargs`` count as passing it, "function", "class" or "method").  A
        method's callers are every ``.name(`` call in the scanned files, whatever the object: its
        name is less telling than a function's or a class's, so there ``*args``/``**kwargs`` in a
        call do not count as passing it.  A module-level function's callers are ``name(...)`` and
        calls through a module (read in default_callers.py)."""
        method = bool(self.class_names and self.class_names[-1])
        if len(self.scopes) > 1 + method or (method and _called_implicitly(function.name)):
            return None  # a nested function, or `forward`/`__call__`, which torch calls without the name
        name = self.class_names[-1] if method and function.name == "__init__" else function.name
        calls = self.calls_named(name)
        if not method:  # `torch.load(f)` is not a call of this file's `load`
            calls = [call for call in calls if isinstance(call.func, ast.Name)]
        if calls:
            return None
        bound = method and not any(getattr(d, "id", "") == "staticmethod" for d in function.decorator_list)
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        position = positional.index(parameter) - bound if parameter in positional else None
        return (name, parameter, position, not method or function.name == "__init__",
                default_of_kind(method, function.name))

    def _cap_after_cuda_exits(self, function, findings) -> None:
        """In a nested block, what follows ``if not torch.cuda.is_available(): return`` runs
        only where CUDA is present.  (The function's own body is handled as it is walked, and
        the ``else`` of such a test in visit_If.)"""
        if not findings:
            return
        spans = []
        # only statements (and handlers, cases) own blocks: expressions are not walked
        for block_owner in (function, *nested_statements(function.body)):
            if block_owner is not function and isinstance(block_owner, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                        ast.ClassDef, ast.Lambda)):
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(block_owner, field, None)
                if not isinstance(block, list) or (block_owner is function and field == "body"):
                    continue
                for index, statement in enumerate(block):
                    if not isinstance(statement, ast.If):
                        continue
                    if self._exits(statement) and self._false_only_with_cuda(statement.test) and index + 1 < len(block):
                        spans.append((block[index + 1].lineno, block[-1].end_lineno or block[-1].lineno))
        if spans:
            self._cap([f for f in findings if any(low <= f.line <= high for low, high in spans)], GUARDED)

    def _cap_support_flags(self, function, findings) -> None:
        """``cuda_ok = torch.cuda.is_available() and ...`` then ``return cuda_ok or
        mps_ok or xpu_ok``: one flag among other accelerators' flags."""
        checks = [f for f in findings if f.rule_id == CUDA_AVAILABILITY_CHECK]
        if not checks:
            return
        listed: set[str] = set()
        for node in walk_nodes(function):
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                names = [v.id for v in node.values if isinstance(v, ast.Name)]
                if any(_accelerator_named(n) not in (None, "cuda") for n in names):
                    listed.update(names)
        if not listed:
            return
        spans = [(s.lineno, s.end_lineno or s.lineno) for s in walk_nodes(function)
                 if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id in listed for t in s.targets)]
        self._cap([f for f in checks if any(low <= f.line <= high for low, high in spans)], LISTS_OTHERS)

    @staticmethod
    def _exits(statement: ast.If) -> bool:
        if statement.orelse or not statement.body:
            return False
        last = statement.body[-1]
        return _is_skip(last) or isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break))

    def _else_exits_unless_cuda(self, statement: ast.If) -> bool:
        """``if torch.cuda.is_available(): device = "cuda"`` then ``else: return`` (or raise): past
        the statement only CUDA remains."""
        if not statement.orelse or not statement.body or self._exits(ast.If(test=statement.test, body=statement.body,
                                                                             orelse=[])):
            return False
        last = statement.orelse[-1]
        return ((_is_skip(last) or isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break)))
                and self.positive_cuda_query(statement.test))

    def _false_only_with_cuda(self, condition) -> bool:
        """``not torch.cuda.is_available()``, ``device.type != "cuda"``, alone or as one term of
        an ``or`` (``args.device < 0 or not torch.cuda.is_available()``): where it is false,
        CUDA is present, so what follows ``if <it>: return`` and the ``else`` of ``if <it>:``
        run only there."""
        tests = condition.values if (isinstance(condition, ast.BoolOp)
                                     and isinstance(condition.op, ast.Or)) else [condition]
        for test in tests:
            if (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
                    and self.positive_cuda_query(test.operand)):
                return True
            if isinstance(test, ast.Name) and self._true_without_cuda(test):
                return True  # `if disable_cuda: ... else: x.cuda()`
            if (isinstance(test, ast.Compare) and len(test.ops) == 1
                    and self.qualname(getattr(test.left, "func", None)) == "torch.cuda.device_count"
                    and self._absent_cuda_query(test)):
                # `if torch.cuda.device_count() == 0: raise` (not any absent test: `backend not in
                # ["nccl", "gloo"]` reads as one)
                return True
            if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.NotIn))
                    and any(CUDA_DEVICE.match(string_value(side) or "") for side in (test.left, test.comparators[0]))):
                return True
        return False

    # -- guards ------------------------------------------------------------------------------

    def positive_cuda_query(self, test) -> bool:
        """True when ``test`` holds only where CUDA is present (so what it guards
        never runs on another accelerator)."""
        if isinstance(test, ast.BoolOp):
            if isinstance(test.op, ast.Or):  # `self.forced_cuda_comm or self.use_cuda`
                return self._all_positive(test.values)
            return any(map(self.positive_cuda_query, test.values))
        if isinstance(test, ast.Call):
            func = test.func
            name = last_name(func)
            if name == "startswith" and test.args:  # str(device).startswith("cuda:")
                return (string_value(test.args[0]) or "").startswith("cuda")
            if (name == "is_available" and isinstance(func, ast.Attribute)
                    and "cuda" in last_name(func.value).lower()):
                return True  # `self._cuda_context.is_available()`: a project's wrapper of the CUDA query
            if name == "len" and len(test.args) == 1 and self.qualname(test.args[0]) == "torch.cuda.default_generators":
                return True  # `len(torch.cuda.default_generators) > 0`: one generator per CUDA device, none without
            return self.qualname(func) in _CUDA_QUERIES or bool(_CUDA_CHECK_FUNCTION.match(name))
        if isinstance(test, ast.Attribute):
            if test.attr == "is_cuda" or self.qualname(test) == "torch.version.cuda":
                return True
            if isinstance(test.value, ast.Name) and test.value.id == "self":
                # `self.cuda = torch.cuda.is_available() and not cfg.cpu`, then `if self.cuda:`
                # (`self.use_cuda = False` first, `self.use_cuda = use_cuda` where the local
                # was narrowed by `use_cuda = use_cuda and torch.cuda.is_available()`)
                values = [v for v in self.self_assignments(test.attr) if not _off(v)] or self._property_value(test.attr)
                if not values or any(isinstance(v, ast.Attribute) for v in values):
                    return False
                return self._all_positive([v for v in values if not self._narrowed(v)])
            return False
        if isinstance(test, ast.IfExp):  # `is_bf16_supported() if new_torch else get_device_capability() >= (8,)`
            return self.positive_cuda_query(test.body) and self.positive_cuda_query(test.orelse)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            # `if not disable_cuda:` where the flag holds wherever CUDA is absent: a name forced so in
            # its function (a module name, or one resolve() finds, may be bound where resolve() does not
            # look: `global`, a walrus, `nonlocal`; a dict's key through another reference to the dict),
            # or an expression (`not torch.cuda.device_count() < 1`)
            if isinstance(test.operand, (ast.Name, ast.Subscript)):
                return isinstance(test.operand, ast.Name) and self._true_without_cuda(test.operand)
            if id(test) in self._open_queries:
                return False
            self._open_queries.add(id(test))
            try:
                return self._absent_cuda_query(test.operand)
            finally:
                self._open_queries.discard(id(test))
        if isinstance(test, ast.Name):  # use_cuda = torch.cuda.is_available()
            value = self.resolve(test)
            if value is None and self._narrowed(test):
                return True
            if value is None:
                # `ok = device == "cuda" and new_torch`, then `if ok: ok = torch.cuda.is_bf16_supported()`:
                # every value bound is a CUDA query
                values = self.bound_values(test.id)
                # (`non_blocking = False` in a branch: a flag that is off guards nothing that runs)
                queries = [v for v in values if not _off(v)]
                if not queries or any(v is None or isinstance(v, ast.Name) for v in queries):
                    return False
                return self._all_positive(queries)
            return not isinstance(value, ast.Name) and self._all_positive([value])
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op, right = test.ops[0], test.comparators[0]
            if isinstance(op, (ast.Eq, ast.Is)) and any(
                    _cuda_enum_member(side) or _nccl_member(side) for side in (test.left, right)):
                return True  # rng_type == RNGType.CUDA, state.distributed_type == DistributedType.MULTI_GPU
            if (isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts
                    and all(map(_cuda_enum_member, right.elts))):
                return True  # distributed_type in [DistributedType.MULTI_GPU]
            if (isinstance(op, (ast.Gt, ast.GtE, ast.IsNot, ast.NotEq)) and not _holds_at_zero(op, right)
                    and self.positive_cuda_query(test.left)):
                return True
            if ((isinstance(op, ast.Eq) and _positive_number(right) or isinstance(op, ast.In) and isinstance(
                    right, (ast.Tuple, ast.List, ast.Set)) and right.elts and all(map(_positive_number, right.elts)))
                    and self.positive_cuda_query(test.left)):
                return True  # `torch.cuda.device_count() == 1`: 0 without CUDA, and a false flag is no number
            if isinstance(op, (ast.Eq, ast.In)):
                for side in (test.left, right):
                    elements = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    if any(_other_choice(e) for e in elements):
                        continue  # `backend in ["nccl", "gloo"]`, `device in ("cuda", "cpu", "auto")`: not CUDA alone
                    for element in elements:
                        value = string_value(element)
                        if value and (CUDA_DEVICE.match(value) or value == "nccl"):  # torchport: ignore
                            return True
        return False

    def _all_positive(self, values) -> bool:
        """Every value is a CUDA query; a value met again while asking (``ok = ok and x``)
        is not one."""
        if any(id(v) in self._open_queries for v in values):
            return False
        self._open_queries.update(map(id, values))
        try:
            return all(map(self.positive_cuda_query, values))
        finally:
            self._open_queries.difference_update(map(id, values))

    def _property_value(self, name: str) -> list[ast.expr]:
        """``@property def forced_cuda_comm(self): return self.backend == "nccl"``: the
        one expression the property returns."""
        if self._property_returns is None:  # one pass over the file's text
            self._property_returns = dict(_PROPERTY_RETURN.findall(self._joined_text()))
        returned = self._property_returns.get(name)
        if returned is None:
            return []
        try:
            return [ast.parse(returned.strip(), mode="eval").body]
        except SyntaxError:
            return []

    def _narrowed(self, name) -> bool:
        """``use_cuda = use_cuda and torch.cuda.is_available()`` in the function that reads
        ``name``, before the read: from there on the flag holds only with CUDA."""
        if not isinstance(name, ast.Name):
            return False
        if self._narrowing_names is None:  # one search of the file, not one per question
            self._narrowing_names = {name for name, same in _NARROWING.findall("\n" + self._joined_text()) if name == same}
        if name.id not in self._narrowing_names:
            return False
        innermost = self._innermost_function(name.lineno)
        if innermost is None:
            return False
        return any(isinstance(node, ast.Assign) and node.lineno < name.lineno
                   and any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets)
                   and isinstance(node.value, ast.BoolOp) and isinstance(node.value.op, ast.And)
                   and any(isinstance(e, ast.Name) and e.id == name.id for e in node.value.values)
                   and any(map(self.positive_cuda_query, node.value.values))
                   for node in walk_nodes(innermost))

    def _absent_cuda_query(self, test) -> bool:
        """True when ``test`` holds wherever CUDA is absent: ``not torch.cuda.is_available()``,
        ``torch.cuda.device_count() < 2``, either side of an ``or``."""
        if isinstance(test, ast.Name) and self._true_without_cuda(test):
            return True
        if isinstance(test, ast.Name):
            value = self.resolve(test)
            if value is None or isinstance(value, ast.Name) or id(value) in self._open_queries or any(
                    isinstance(n, ast.Name) and n.id == test.id for n in walk_nodes(value)):
                return False  # `x = x or not torch.cuda.is_available()`: x read before that line is another value
            self._open_queries.add(id(value))
            try:
                return self._absent_cuda_query(value)
            finally:
                self._open_queries.discard(id(value))
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            operand = test.operand
            if isinstance(operand, ast.BoolOp) and isinstance(operand.op, ast.Or):
                # `not (flag in ("cuda", "gpu") or isinstance(flag, CUDAAccelerator))`: every part,
                # since `not (cuda or mps)` is false on a Mac
                return self._all_positive(operand.values)
            return self.positive_cuda_query(operand)
        if isinstance(test, ast.BoolOp):
            return isinstance(test.op, ast.Or) and any(map(self._absent_cuda_query, test.values))
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotIn, ast.NotEq))
                and self.positive_cuda_query(ast.Compare(left=test.left, ops=[ast.In() if isinstance(
                    test.ops[0], ast.NotIn) else ast.Eq()], comparators=test.comparators))):
            return True  # `accelerator not in ("cuda", "gpu")`
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant)
                and (test.comparators[0].value is False and isinstance(test.ops[0], (ast.Is, ast.Eq))
                     or test.comparators[0].value is True and isinstance(test.ops[0], (ast.IsNot, ast.NotEq)))):
            return self.positive_cuda_query(test.left)  # `torch.cuda.is_available() is False`
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE, ast.Eq)):
            left, op, right = test.left, test.ops[0], test.comparators[0]
            # `torch.cuda.device_count() < 2`, `<= 0`, `== 0`: true at a count of 0 (`== 1` is not)
            number = right.value if isinstance(right, ast.Constant) and isinstance(right.value, (int, float)) and not (
                isinstance(right.value, bool)) else None
            return (isinstance(left, ast.Call) and self.qualname(left.func) == "torch.cuda.device_count"
                    and number is not None and (number > 0 if isinstance(op, ast.Lt) else
                                                number >= 0 if isinstance(op, ast.LtE) else number == 0))
        return False

    def _true_without_cuda(self, flag: ast.Name) -> bool:
        """A name forced on where CUDA is absent in the function that reads it: ``disable_cuda =
        disable_cuda or not torch.cuda.is_available()`` (read by ``forcing_end``).  A parameter that
        every call fills so is read across the scanned files (reachability.py)."""
        if self._forcing is None:  # one search of the file, not one per question
            self._forcing = {name for name, value in _FORCING.findall(self._joined_text())
                             if _FORCED_ON.search(" ".join(value.split()))}
        if flag.id not in self._forcing:
            return False  # no statement of the file may force it: the whole file is not parsed for it
        function = self._innermost_function(flag.lineno)
        if function is None:
            return False
        key = (id(function), ast.unparse(flag))
        if key not in self._forcing_ends:  # one reading per function and flag, however often it is tested
            self._forcing_ends[key] = forcing_end(function, flag, self._plain_absent_query)
        return forced_when_read(function, self._forcing_ends[key], flag)

    def _plain_absent_query(self, value) -> bool:
        """``not torch.cuda.is_available()``, ``torch.cuda.device_count() == 0``: true wherever no
        GPU is, read from the expression alone (no local name in it, and a call asking for a GPU:
        ``not torch.version.cuda`` is false on a CUDA build of torch without one)."""
        nodes = list(walk_nodes(value))
        if any(isinstance(n, ast.Name) and n.id not in self.aliases and n.id != "torch" for n in nodes):
            return False
        if not any(isinstance(n, ast.Call) and self.qualname(n.func) in _SAFE_CUDA_QUERIES for n in nodes):
            return False
        return self._absent_cuda_query(value)

    def _innermost_function(self, line: int):
        """The innermost ``def`` of the whole file around ``line``."""
        if self._calls is None:
            self._index_whole_file()
        around = [f for f in self._functions.values() if f.lineno < line <= (f.end_lineno or 0)]
        return max(around, key=lambda f: f.lineno) if around else None

    def cuda_only_test(self, decorator) -> bool:
        """``@pytest.mark.skipif(not torch.cuda.is_available(), ...)``,
        ``@unittest.skipUnless(torch.cuda.is_available(), ...)`` or a name bound to
        one (``requires_cuda = pytest.mark.skipif(...)``): the test runs only with CUDA."""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        helper = last_name(target)
        if _CUDA_SKIP_HELPER.fullmatch(helper.strip("_")) or self._skip_helper_tests_cuda(helper):
            return True  # `@skip_if_no_cuda()`, defined in a test helper
        if isinstance(decorator, ast.Name):
            decorator = self.resolve(decorator)
        if isinstance(decorator, (ast.List, ast.Tuple)):  # pytestmark = [mark, ...]
            return any(map(self.cuda_only_test, decorator.elts))
        name = self.skip_decorator(decorator.func) if isinstance(decorator, ast.Call) else None
        if name is None:
            return False
        condition = decorator.args[0] if decorator.args else keyword_value(decorator, "condition")
        if condition is None:
            return False
        if name in ("skipif", "skipIf"):
            return self._absent_cuda_query(condition) or _skips_for_a_named_gpu(decorator, condition, negated=True)
        return name == "skipUnless" and (self.positive_cuda_query(condition)
                                         or _skips_for_a_named_gpu(decorator, condition, negated=False))

    def _skip_everywhere(self, decorator) -> str | None:
        """``unittest`` for ``@unittest.skip(...)``, ``pytest`` for ``@pytest.mark.skip`` (called
        or not) and ``@pytest.mark.skipif(True, ...)``: the library's, not a name the file binds
        otherwise (a ``def``, a ``class`` or an assignment anywhere, in a block too)."""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        # the scanner parses only statements with trigger words: the file's imports decide
        root, _, rest = dotted_name(target).partition(".")
        if not (root and last_name(target) in ("skip", "skipif")):
            return None  # most decorators: no search of the file
        module = self.whole_file_imports().get(root)
        qualname = (f"{module}.{rest}" if rest else module) if module else self.qualname(target)
        condition = (decorator.args[0] if decorator.args else keyword_value(decorator, "condition")
                     ) if isinstance(decorator, ast.Call) else None
        if qualname in ("unittest.skip", "unittest.case.skip"):
            library = "unittest"
        elif qualname == "pytest.mark.skip" or (qualname == "pytest.mark.skipif" and isinstance(condition, ast.Constant)
                                                 and condition.value is True):
            library = "pytest"
        else:
            return None
        if re.search(r"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+" + re.escape(root) + r"\b|^[ \t]*"
                     + re.escape(root) + r"[ \t]*(?::[^=\n]*)?=(?!=)", self._joined_text(), re.M):
            return None
        return library

    def _pytest_marks_only_above(self, decorators: list, index: int) -> bool:
        """Whether every decorator above ``decorators[index]`` is a pytest mark: another may return
        an object without the marks applied before it."""
        return all(dotted_name(d.func if isinstance(d, ast.Call) else d).split(".")[1:2] == ["mark"]
                   for d in decorators[:index])

    def _spelled_once(self, name: str) -> bool:
        """Whether the file spells ``name`` once, at its definition: nothing calls it by name."""
        counts = self.__dict__.get("_word_counts")
        if counts is None:
            counts = self.__dict__["_word_counts"] = Counter(re.findall(r"\w+", self._joined_text()))
        return counts[name] == 1

    def _test_skipped_everywhere(self, node) -> bool:
        """A test function that never runs: under ``@unittest.skip`` (a call raises SkipTest), or
        a ``test*`` that pytest collects, spelled only at its ``def``, under ``@pytest.mark.skip``."""
        for index, decorator in enumerate(node.decorator_list):
            library = self._skip_everywhere(decorator)
            if library == "unittest" or library == "pytest" and node.name.startswith("test") and (
                    self._spelled_once(node.name) and self._pytest_marks_only_above(node.decorator_list, index)):
                return True
        return False

    def _class_skipped_everywhere(self, node: ast.ClassDef) -> bool:
        """``@unittest.skip`` over a ``TestCase`` (the unittest runner and pytest both honour it
        there), ``@pytest.mark.skip`` over a ``Test*`` class pytest collects."""
        for index, decorator in enumerate(node.decorator_list):
            library = self._skip_everywhere(decorator)
            if library == "unittest" and any(last_name(b).endswith("TestCase") for b in node.bases):
                return True
            if (library == "pytest" and node.name.startswith("Test")
                    and self._pytest_marks_only_above(node.decorator_list, index)):
                return True
        return False

    def skip_decorator(self, func: ast.expr) -> str | None:
        """``skipIf``, ``skipUnless`` or ``skipif`` where ``func`` names one: ``unittest.skipUnless``,
        ``pytest.mark.skipif``, or a bare ``skipUnless`` imported from unittest."""
        if isinstance(func, ast.Attribute):
            return func.attr if func.attr in _SKIP_DECORATORS else None
        if not isinstance(func, ast.Name) or func.id not in _SKIP_DECORATORS:
            return None
        # the scanner parses only statements with trigger words, so the import may be missing from
        # the tree visited: the whole file's imports decide, and a skipIf the file defines at the top is its own
        qualname = self.qualname(func) or self.whole_file_imports().get(func.id)
        if qualname is None or self.definition(func.id) is not None:
            return None
        return func.id if qualname.startswith(("unittest.", "pytest.")) else None

    def _skip_helper_tests_cuda(self, name: str) -> bool:
        """A decorator defined in this file whose body skips unless CUDA is present:
        ``def requires_gpu(f): ... if not torch.cuda.is_available(): raise SkipTest``."""
        if not name or not re.search(r"skip|require|only|need", name, re.I):
            return False
        definition = self.definition(name)
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        return any(isinstance(node, ast.If) and self._false_only_with_cuda(node.test) for node in walk_nodes(definition))

    def _skips_unless_cuda(self, statement) -> bool:
        """``pytest.importorskip("flash_attn")`` (a CUDA-only package), ``pytestmark =
        pytest.mark.skipif(not torch.cuda.is_available(), ...)``: what follows runs only with CUDA."""
        if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in statement.targets):
            return self.cuda_only_test(statement.value)
        last = statement.body[-1] if isinstance(statement, ast.If) and statement.body else None
        if (isinstance(statement, ast.If) and self._exits(statement) and isinstance(last, ast.Expr)
                and _is_skip(last) and isinstance(last.value, ast.Call)
                and keyword_value(last.value, "allow_module_level") is not None):
            # `if not torch.cuda.is_available(): pytest.skip(..., allow_module_level=True)`
            return self._false_only_with_cuda(statement.test)
        value = statement.value if isinstance(statement, (ast.Expr, ast.Assign)) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr == "importorskip" and value.args):
            return False
        module = string_value(value.args[0])
        return module is not None and classify_import(module) is not None

    def visit_With(self, node) -> None:
        """``with torch.device("cpu"):`` makes the block's tensors host tensors."""
        for item in node.items:
            context = item.context_expr
            if (isinstance(context, ast.Call) and self.qualname(context.func) == "torch.device" and context.args
                    and (string_value(context.args[0]) or "").split(":")[0] == "cpu"):
                for statement in node.body:
                    self.host.update(map(id, walk_nodes(statement)))
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_Module(self, node: ast.Module) -> None:
        self._visit_body(node.body)
        cuda_home = [f for f in self.findings if f.rule_id == CUDA_EXTENSION_BUILD and "CUDA_HOME" in f.detail]
        if cuda_home and self._cuda_home_handled(node):
            self._cap(cuda_home, "CUDA_HOME is read where its None case (no CUDA toolkit) is handled")
        self._cap_lazy_callbacks(node)
        self._cap_helpers_of_cuda_tests(node)
        folder = _implementation_folder(self.path)
        if folder:  # `bitsandbytes/backends/cuda/ops.py`, `accelerators/hpu/...`
            self._cap(self.findings, _IMPLEMENTATION.format(folder.upper()))
        stem = _module_stem(self.path)
        device = _accelerator_named(stem)
        if device and any(isinstance(c, ast.ClassDef) and _implementation_class(c) == device for c in node.body):
            # `strategies/xla.py` defining `class XLAStrategy(DDPStrategy)`: its module-level
            # helpers serve that implementation only.
            self._cap(self.findings, _IMPLEMENTATION.format(device.upper()))
        elif _opt_in_feature_named(stem):  # `utils/transformer_engine.py`
            self._cap(self.findings, _OPT_IN_IMPLEMENTATION)
        self._cap_device_named_variants(node)
        self._cap_device_adaptations(node)
        kernels = [f for f in self.findings if f.rule_id == TRITON_KERNEL and f.severity_cap != "info"]
        if kernels and self._package_imports_only_with_triton(stem):
            self._cap(kernels, "its package imports this module only where Triton is available")

    def _cap_device_adaptations(self, tree: ast.Module) -> None:
        """``if x.device.type != "cuda": return None``, ``pin_memory=device.type == "cuda"``:
        a test of the device the code was given adapts the code to it; it chooses no
        device.  It does choose one, silently, where the statement falls back to the CPU
        (``"cuda" if x.is_cuda else "cpu"``, ``x.cpu()``), and stays reported there."""
        tests = [f for f in self.findings if _device_test(f) and f.severity_cap != "info"]
        builds = [f for f in self.findings if f.rule_id == CUDA_AVAILABILITY_CHECK
                  and f.detail == "torch.version.cuda" and f.severity_cap != "info"]
        if not tests and not builds:
            return
        statements = [s for s in walk_nodes(tree) if isinstance(s, ast.stmt)
                      and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        # Each statement read once: the statements after an exiting `if` are shared by every
        # test before them in the block.
        falls_back: dict[int, bool] = {}
        mentions_cpu: dict[int, bool] = {}
        names_device: dict[int, bool] = {}

        def cached(read, answers: dict[int, bool], statement: ast.stmt) -> bool:
            if id(statement) not in answers:
                answers[id(statement)] = read(statement)
            return answers[id(statement)]

        # The innermost statement at each finding's line (the first of the shortest, in walk order).
        lines = sorted({f.line for f in (*tests, *builds)})
        innermost: dict[int, ast.stmt] = {}
        for statement in statements:
            end = statement.end_lineno or statement.lineno
            for line in lines[bisect.bisect_left(lines, statement.lineno):bisect.bisect_right(lines, end)]:
                held = innermost.get(line)
                if held is None or end - statement.lineno < (held.end_lineno or held.lineno) - held.lineno:
                    innermost[line] = statement
        for finding in tests:
            decided = self._decided_by(innermost.get(finding.line))
            if decided and not any(cached(_falls_back_to_cpu, falls_back, s) for s in decided):
                # Before round 26 any "cpu" in the statement kept the test reported.
                beside_cpu = any(cached(_mentions_cpu, mentions_cpu, s) for s in decided)
                self._cap([finding], ADAPTS_BESIDE_A_CPU_TEST if beside_cpu else ADAPTS_TO_DEVICE)
        parents: dict[int, dict[int, ast.AST]] = {}
        read_in: dict[int, defaultdict[int, list[ast.Attribute]]] = {}
        without_choice: dict[tuple[int, int], bool] = {}
        for finding in builds:
            # An `if` that exits (`if torch.version.cuda is None: return`) skips what follows on
            # every build without CUDA: that is the check's consequence, and it stays reported.
            found = innermost.get(finding.line)
            if found is None or isinstance(found, ast.If) and self._exits(found):
                continue
            statement = found
            if isinstance(statement, (ast.If, ast.While)) and _binds_a_name(statement):
                continue  # `if torch.version.cuda: arch = "..."`: a value the build chooses, read later
            if id(statement) not in read_in:
                nodes = list(walk_nodes(statement))
                parents[id(statement)] = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
                read_in[id(statement)] = defaultdict(list)
                for node in nodes:
                    if isinstance(node, ast.Attribute) and self.qualname(node) == "torch.version.cuda":
                        read_in[id(statement)][node.lineno].append(node)
            key = (id(statement), finding.line)
            if key not in without_choice:
                reads = read_in[id(statement)].get(finding.line, [])
                without_choice[key] = bool(reads) and not cached(_names_a_device, names_device, statement) and all(
                    self._build_version_read_without_choice(statement, read, parents[id(statement)], statements)
                    for read in reads)
            if without_choice[key]:
                self._cap([finding], BUILD_FACT)

    def _build_version_read_without_choice(self, statement: ast.stmt, read: ast.Attribute,
                                           parents: dict[int, ast.AST], statements: list[ast.stmt]) -> bool:
        """``read``, a ``torch.version.cuda`` in ``statement``, works where it is None (torch
        built without CUDA) and keeps no flag for later: the test of an ``if``, ``while`` or
        ``assert`` (``if torch.version.cuda:``, ``is None``, ``not``, ``== "12.1"``), or, in
        another statement, a version shown as text (an f-string, ``torch.version.cuda or
        "unknown"``, an argument of ``print`` or a logger, an entry of a report).  A read that
        fails on None (``torch.version.cuda.split(".")``, ``float(...)``, ``version.parse(...)``,
        ``"11" in ...``) counts only under a test that it is set; one kept as a flag (``use_cuda
        = torch.version.cuda is not None``, ``return bool(...)``) may choose a device later."""
        test = statement.test if isinstance(statement, (ast.If, ast.While, ast.Assert)) else None
        parent = parents.get(id(read))
        in_test = test is not None and (read is test or any(node is read for node in walk_nodes(test)))
        if in_test and (read is test or isinstance(parent, (ast.BoolOp, ast.UnaryOp)) or (
                isinstance(parent, ast.Compare) and all(
                    isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
                    or (isinstance(op, (ast.In, ast.NotIn)) and read is parent.left) for op in parent.ops))):
            return True
        grandparent = parents.get(id(parent))
        shown = ((isinstance(parent, ast.FormattedValue) and _shown_in_message(parent, parents))
                 or (isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or)
                     and any(string_value(v) is not None for v in parent.values))
                 or (isinstance(parent, ast.Call) and any(a is read for a in parent.args)
                     and last_name(parent.func) in _PRINTING_CALLS
                     # `str(torch.version.cuda).split(".")`, `int(str(...))`: the text is then parsed
                     and not (last_name(parent.func) in ("str", "repr")
                              and isinstance(grandparent, (ast.Attribute, ast.Call))))
                 or (isinstance(parent, ast.Dict) and any(v is read for v in parent.values)
                     and None not in parent.keys  # `{**os.environ, "CUDA": ...}`: an environment
                     and not (isinstance(grandparent, ast.keyword) and grandparent.arg == "env"))
                 or (isinstance(parent, (ast.Tuple, ast.List))
                     and not isinstance(grandparent, (ast.Assign, ast.Return))
                     and not (isinstance(grandparent, ast.Call) and last_name(grandparent.func) == "join")))
        return shown or self._build_version_is_set(read, parents, statements)

    def _holds_only_with_a_cuda_build(self, test) -> bool:
        """``torch.version.cuda``, ``torch.version.cuda is not None`` or an ``and`` holding one:
        true only where the build has a CUDA version."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(map(self._holds_only_with_a_cuda_build, test.values))
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.IsNot, ast.NotEq))
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
            test = test.left
        return isinstance(test, ast.Attribute) and self.qualname(test) == "torch.version.cuda"

    def _build_version_is_set(self, read, parents: dict[int, ast.AST], statements: list[ast.stmt]) -> bool:
        """``read`` runs only where ``torch.version.cuda`` is set: after it in an ``and``
        (``torch.version.cuda and torch.version.cuda.split(".")``), in the body of a
        conditional expression or an ``if`` that tests it."""
        child, node = read, parents.get(id(read))
        while node is not None:
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
                before = node.values[:next(i for i, v in enumerate(node.values) if v is child)]
                if any(map(self._holds_only_with_a_cuda_build, before)):
                    return True
            if isinstance(node, ast.IfExp) and child is node.body and self._holds_only_with_a_cuda_build(node.test):
                return True
            child, node = node, parents.get(id(node))
        line = read.lineno
        return any(isinstance(s, ast.If) and s.body and s.body[0].lineno <= line <= (s.body[-1].end_lineno or line)
                   and self._holds_only_with_a_cuda_build(s.test) for s in statements)

    def _decided_by(self, statement: ast.stmt | None) -> list[ast.stmt]:
        """``statement``, the innermost at a test's line, and, where it is an ``if`` that exits,
        the statements after it in its block (``if x.device.type == "cuda": return x`` then
        ``return x.cpu()``): what the test decides."""
        if statement is None:
            return []
        if isinstance(statement, ast.If) and self._exits(statement):
            block = self.blocks.get(id(statement), [])
            return [statement, *block[block.index(statement) + 1:]] if statement in block else [statement]
        return [statement]

    def _package_imports_only_with_triton(self, stem: str) -> bool:
        """``if is_triton_available(): from .logprob_entropy import ...`` in the package's
        ``__init__.py``: the kernels of that module load only where Triton is."""
        init = os.path.join(os.path.dirname(self.path), "__init__.py")
        if stem == "__init__" or not os.path.isfile(init):
            return False
        try:
            with open(init, encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError):
            return False
        guarded, bare = 0, 0

        def walk(statements, under_flag: bool) -> None:
            nonlocal guarded, bare
            for statement in statements:
                if isinstance(statement, ast.ImportFrom) and statement.level == 1 and (
                        statement.module == stem or (statement.module is None
                                                     and any(a.name == stem for a in statement.names))):
                    if under_flag:
                        guarded += 1
                    else:
                        bare += 1
                elif isinstance(statement, ast.If):
                    walk(statement.body, under_flag or self._kernel_flag(statement.test))
                    walk(statement.orelse, under_flag)
                elif isinstance(statement, ast.Try):
                    walk(statement.body, under_flag)

        walk(tree.body, False)
        return guarded > 0 and bare == 0

    def _cap_device_named_variants(self, tree: ast.Module) -> None:
        """``def tpu_launcher`` beside ``def multi_gpu_launcher`` and ``def simple_launcher``:
        one variant of a family of module-level functions, chosen for its device."""
        functions = [f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and _accelerator_named(f.name.split("_", 1)[0]) and f.name.partition("_")[2]]
        if not functions or not self.findings:
            return
        if self._definitions is None:
            self._index_whole_file()  # the tree visited may hold only the functions with trigger words
        names = set(self._definitions or ())
        for function in functions:
            device = _accelerator_named(function.name.split("_", 1)[0]) or ""
            suffix = function.name.partition("_")[2]
            if not any(n != function.name and n.endswith("_" + suffix) for n in names):
                continue
            low, high = function.lineno, function.end_lineno or function.lineno
            self._cap([f for f in self.findings if low <= f.line <= high], _IMPLEMENTATION.format(device.upper()))

    def _cap_helpers_of_cuda_tests(self, tree) -> None:
        """A helper (``_test_impls_helper``) that this file calls only from tests that run
        only with CUDA (``@skip_if_no_cuda()``): it runs only with CUDA too."""
        spans = self.__dict__.get("cuda_only_spans")
        if not spans or not self.findings:
            return
        # module-level functions and the methods of test classes: another class's method may be
        # called implicitly (`forward` through `model(x)`, `__iter__` through `list(loader)`)
        candidates = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef) and (cls.name.startswith("Test") or any(
                    str(getattr(b, "attr", None) or getattr(b, "id", "")).endswith("TestCase") for b in cls.bases)):
                candidates += [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                               and not m.name.startswith("__")]
        for function in candidates:
            if function.name.startswith("test"):
                continue
            low, high = function.lineno, function.end_lineno or function.lineno
            inside = [f for f in self.findings if low <= f.line <= high and f.severity_cap != "info"]
            if not inside:
                continue
            calls = self.calls_named(function.name)
            if calls and all(any(a <= call.lineno <= b for a, b in spans) for call in calls):
                self._cap(inside, "a helper called only from tests that run only where CUDA is present")
        self._cap_functions_handed_only_to_cuda_tests(list(spans))

    def _cap_functions_handed_only_to_cuda_tests(self, spans: list[tuple[int, int]]) -> None:
        """``run_demo(demo_basic, ...)`` in a test under ``@unittest.skipIf(torch.cuda.device_count()
        < 2)``, and ``setup()`` called only in ``demo_basic``: a module-level function whose every
        mention in the file (a call, a name handed on, a string or a comment) lies in such a test or
        in a function already found so runs only where CUDA is present, unless another module
        imports it.  Its findings are marked; the whole scan lowers them if no other scanned file
        spells the function or one it is reached through (reachability.candidates)."""
        if self._calls is None:
            self._index_whole_file()
        if self._definitions is None or self.path.replace("\\", "/").endswith("/__init__.py"):
            return
        functions = {f.name: f for f in self._definitions.values() if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and not f.name.startswith("test") and not f.decorator_list}
        if not functions:
            return
        text = "\n".join(self.lines)
        starts = [0]
        for line in self.lines:
            starts.append(starts[-1] + len(line) + 1)
        mentions: dict[str, list[int]] = {name: [] for name in functions}
        for match in re.finditer(r"[A-Za-z_]\w*", text):  # one pass over the file for every name
            lines = mentions.get(match.group())
            if lines is not None:
                lines.append(bisect.bisect_right(starts, match.start()))
        for name, function in functions.items():
            low, high = function.lineno, function.end_lineno or function.lineno
            mentions[name] = [n for n in mentions[name] if not low <= n <= high]
        through: dict[str, tuple[str, ...]] = {}  # a function found, and those it is reached through
        found_spans: list[tuple[int, int, str]] = []
        for _ in range(4):  # a test hands on a runner, which spawns a worker, which calls a setup
            grown = False
            for name, lines in mentions.items():
                if name in through or not lines:
                    continue
                holders = []
                for n in lines:
                    holder = next((h for low, high, h in found_spans if low <= n <= high), None)
                    if holder is None and not any(a <= n <= b for a, b in spans):
                        break
                    if holder is not None:
                        holders.append(holder)
                else:
                    through[name] = tuple(dict.fromkeys((name, *(x for h in holders for x in through[h]))))
                    function = functions[name]
                    found_spans.append((function.lineno, function.end_lineno or function.lineno, name))
                    grown = True
            if not grown:
                break
        for low, high, name in found_spans:
            reason = f"in {name}, which this file uses only in tests that run only where CUDA is present"
            for finding in self.findings:
                if low <= finding.line <= high and finding.severity_cap != "info":
                    finding.only_in_cuda_tests = (through[name], reason)

    def _cap_lazy_callbacks(self, tree) -> None:
        """``torch.cuda._lazy_call(cb)``: the callback is queued until CUDA initialises,
        so without CUDA it never runs; what it does, and the call itself, is info."""
        if not self.findings or not any("_lazy_call" in line for line in self.lines):
            return
        spans, callbacks = [], set()
        for call in walk_nodes(tree):
            if not (isinstance(call, ast.Call) and (self.qualname(call.func) or "").endswith("cuda._lazy_call")):
                continue
            spans.append((call.lineno, call.end_lineno or call.lineno))
            if call.args and isinstance(call.args[0], ast.Name):
                callbacks.add(call.args[0].id)
        for function in walk_nodes(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and function.name in callbacks:
                spans.append((function.lineno, function.end_lineno or function.lineno))
        if spans:
            self._cap([f for f in self.findings if any(low <= f.line <= high for low, high in spans)], _LAZY_CALL)

    def _visit_body(self, body) -> None:
        """Statements in order; after one that skips the rest unless CUDA is present,
        the rest is capped."""
        cuda_only = ""
        for statement in body:
            start = len(self.findings)
            self.visit(statement)
            if cuda_only:
                self._cap(self.findings[start:], cuda_only)
            elif self._skips_unless_cuda(statement):
                cuda_only = SKIPPED_TEST
            elif isinstance(statement, ast.Assert) and self.positive_cuda_query(statement.test):
                cuda_only = _ASSERTED  # `assert torch.cuda.is_available(), "needs CUDA"` at import

    def positive_xla_query(self, test) -> bool:
        """``is_torch_xla_available()``, ``_XLA_AVAILABLE``, ``x == DistributedType.XLA``:
        true only where torch_xla is installed."""
        if isinstance(test, ast.BoolOp):
            return isinstance(test.op, ast.And) and any(map(self.positive_xla_query, test.values))
        if isinstance(test, ast.Call):
            test = test.func
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = test.id if isinstance(test, ast.Name) else test.attr
            return "xla" in name.lower() or "tpu" in name.lower()
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is, ast.In)):
            return any(self.positive_xla_query(side) or (string_value(side) or "").split(":")[0] in ("xla", "tpu")
                       for side in (test.left, test.comparators[0]))
        return False

    @staticmethod
    def _type_checking(test) -> bool:
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")

    def _mentions_other_accelerator(self, nodes) -> bool:
        for root in nodes:
            for node in walk_nodes(root):
                if isinstance(node, ast.Name):
                    word = node.id
                elif isinstance(node, ast.Attribute):
                    word = node.attr
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    word = node.value.split(":")[0]
                else:
                    continue
                if (word in _OTHER_ACCELERATOR_WORDS or _OTHER_ACCELERATOR_CHECK.fullmatch(word)
                        or word.startswith("is_") and word[3:] in _OTHER_ACCELERATOR_WORDS):  # x.is_xpu
                    return True
        return False

    def _chain_has_other_branch(self, node: ast.If) -> bool:
        """Whether the if/elif/else chain starting at ``node`` has a branch (other than
        the CUDA ones) for another accelerator.  Stored for every elif of the chain."""
        if id(node) in self.chain_portable:
            return self.chain_portable[id(node)]
        chain, others, current = [], [], node
        while True:
            chain.append(current)
            if not self.positive_cuda_query(current.test):
                others += [current.test, *current.body]
            if len(current.orelse) == 1 and isinstance(current.orelse[0], ast.If):
                current = current.orelse[0]
                continue
            others += current.orelse
            break
        # Consecutive `if device_type == 'cuda': ... if device_type == 'npu': ...`
        # statements dispatch just like an elif chain.
        siblings = [sibling.test for sibling in self.blocks.get(id(node), ())
                    if isinstance(sibling, ast.If) and sibling is not node
                    and not self.positive_cuda_query(sibling.test)]
        # `if devices[0].type == "cpu": ... if devices[0].type == "cuda": ...`: the code
        # tells device types apart (the user's choice), it does not assume CUDA.
        subject = _device_subject(node.test)
        portable = self._mentions_other_accelerator(others) or any(
            self._mentions_other_accelerator([test]) and self._compares_or_checks(test) for test in siblings) or (
            subject is not None and any(_device_subject(test, other=True) == subject
                                        for test in [*siblings, *(member.test for member in chain[1:])]))
        for member in chain:
            self.chain_portable[id(member)] = portable
        return portable

    @staticmethod
    def _compares_or_checks(test) -> bool:
        return isinstance(test, (ast.Compare, ast.Call, ast.BoolOp))

    def _register_dispatch_default(self, node: ast.If) -> None:
        """``if is_xpu_available(): ... elif is_npu_available(): ... else: <CUDA code>``: the
        final ``else`` of a chain with branches for two other accelerators or more is the
        CUDA member of a dispatch.  Stored under the last ``if`` of the chain, with whether
        the chain also has a CPU branch (without one, the ``else`` runs on the CPU too)."""
        chain, current = [node], node
        while (len(current.orelse) == 1 and isinstance(current.orelse[0], ast.If)
               and current.orelse[0].col_offset == node.col_offset):  # `elif`, not `else:` holding an `if`
            current = current.orelse[0]
            chain.append(current)
        if not current.orelse or id(current) in self.dispatch_defaults:
            return
        others = [m.test for m in chain if not self.positive_cuda_query(m.test)
                  and self._compares_or_checks(m.test) and self._mentions_other_accelerator([m.test])]
        if len(others) >= 2:
            self.dispatch_defaults[id(current)] = any(
                (string_value(n) or "").split(":")[0] == "cpu" or getattr(n, "attr", getattr(n, "id", "")) == "CPU"
                for test in others for n in walk_nodes(test))

    def _cap_dispatch_default(self, node: ast.If, findings) -> None:
        if id(node) not in self.dispatch_defaults:
            return
        cpu_branch = self.dispatch_defaults[id(node)]
        targets = RULES_BY_ID[CUDA_DEVICE_STRING].severity.keys()
        # Without a CPU branch an error there (`.cuda()` on a CPU host) is still an error.
        self._cap([f for f in findings if cpu_branch or finding_worst(f, targets) != "error"], _DISPATCH_DEFAULT)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        self._register_dispatch_default(node)
        if self._type_checking(test) or self.positive_xla_query(test):
            start = len(self.findings)
            self.visit(test)
            body_start = len(self.findings)
            for statement in node.body:
                self.visit(statement)
            body = self.findings[body_start:]
            if self._type_checking(test):
                self._cap(body, _TYPE_CHECKING)
            else:
                self._cap([f for f in body if f.rule_id in _XLA_RULES], _XLA_GUARDED)
            self._visit_orelse(node)
            return
        if node.orelse and not self.positive_cuda_query(test) and self._kernel_flag(test):
            # `if has_triton(): <Triton kernel> else: <native fallback>`
            start = len(self.findings)
            self.visit(test)
            for statement in node.body:
                self.visit(statement)
            self._cap([f for f in self.findings[start:] if f.rule_id == TRITON_KERNEL], _FEATURE_GATE)
            self._visit_orelse(node)
            return
        if self._nvidia_opt_in(test):
            start = len(self.findings)
            self.visit(test)
            for statement in node.body:
                self.visit(statement)
            self._cap(self.findings[start:], _OPT_IN)
            self._visit_orelse(node)
            return
        positive = self.positive_cuda_query(test)
        convertible = (isinstance(test, ast.Call) and not test.args and not test.keywords
                       and self.qualname(test.func) == "torch.cuda.is_available")
        start = len(self.findings)
        if not convertible:
            self.visit(test)
            self._one_per_condition(start)
        test_findings = self.findings[start:]
        body_start = len(self.findings)
        for statement in node.body:
            self.visit(statement)
        body = body_findings = self.findings[body_start:]
        if convertible:
            assert isinstance(test, ast.Call)
            if body and all(f.fix is not None for f in body):
                need = max((f.fix.min_torch for f in body if f.fix is not None), key=version_key)
                need = max(need, "2.6", key=version_key)
                guard = self.report(CUDA_AVAILABILITY_CHECK, test, "if torch.cuda.is_available():",
                                    [replace_node(test.func, f"{self.T}.accelerator.is_available")], need)
            else:
                guard = self.report(CUDA_AVAILABILITY_CHECK, test, "torch.cuda.is_available()")
            self.claimed.add(id(test.func))
            test_findings = [guard]
        in_test = (bool(self.context_names) and self.context_names[-1].startswith("test")
                   and (is_test_file(self.path) or any(_TEST_CLASS.match(n) for n in self.class_names)))
        exit_without_cuda = (node.orelse[-1] if node.orelse and positive else
                             node.body[-1] if self._exits(node) and self._false_only_with_cuda(node.test) else None)
        if in_test and isinstance(exit_without_cuda, ast.Return) and exit_without_cuda.value is None:
            # `if not torch.cuda.is_available(): return` at the top of a test: it skips itself
            self._cap(test_findings, _DECIDES_SKIP)
        if self._exits(node) and _is_skip(node.body[-1]):
            # `if not torch.cuda.is_available(): pytest.skip()`, `if not (cuda or xpu): return
            # unittest.skip(...)(test_case)`: whatever the condition, it decides a skip.
            self._cap(test_findings, _DECIDES_SKIP)
        if (positive and not node.orelse and _defines_only_tests(node.body) and self._asks_only_safely(test)
                and (is_test_file(self.path) or _TEST_CLASS.match(self.class_names[-1] if self.class_names else ""))):
            # `if torch.cuda.is_available(): def test_moving_to_gpu(self): ...`: the check decides
            # whether the tests exist; without CUDA they are not collected.
            self._cap(test_findings, _DECIDES_SKIP)
            self._cap(body_findings, SKIPPED_TEST)
        checks = [f for f in test_findings if f.rule_id == CUDA_AVAILABILITY_CHECK]
        if checks:
            absent = self._negates_cuda(test) or self._false_only_with_cuda(node.test)
            if (absent and _raises(node.body)) or (positive and _raises(node.orelse)):
                self._cap(checks, _EXPLICIT_ERROR)  # `if x.device.type != "cuda": raise ValueError(...)`
            elif absent and self._warns_and_skips(node.body):
                self._cap(checks, _WARNS_AND_SKIPS)  # `if not cuda: logger.warning(...); continue`
            elif absent and not node.orelse and _asserts_only(node.body):
                # `if not torch.cuda.is_available(): assert mmcv_version >= (1, 4, 4)`
                self._cap(checks, _ASSERTS_ONLY)
            elif (_diagnostic(test) or self._diagnostics_only(node.body if positive else node.orelse or node.body)
                  or (self.context_names and _DIAGNOSTIC_NAME.search(self.context_names[-1]))
                  or (node.orelse and self._messages_only(node.body) and self._messages_only(node.orelse))):
                self._cap(checks, _DIAGNOSTICS)
            elif self._building():
                self._cap(checks, _BUILD_CHECK)
            elif positive and not node.orelse and self._housekeeping_only(node.body):
                self._cap(checks, _HOUSEKEEPING)
            elif (positive and not node.orelse and self._syncs_only(node.body) and self.context_names
                  and _CHOOSES_KERNEL.search(self.context_names[-1])):
                self._cap(checks, _KERNEL_TIMING)
        if positive:
            self._cap(body, GUARDED)
            if self._chain_has_other_branch(node):
                self._cap(test_findings, _DISPATCH)
            elif not node.orelse and _asserts_only(node.body):
                # `if torch.cuda.is_available(): assert ...` in a test: skipping it elsewhere
                # skips a check of CUDA state, and nothing else.
                self._cap(test_findings, "the check guards only assertions about CUDA state")
        self._cap([f for f in body if imports_checked_package(f, test) or (
            f.rule_id == TRITON_KERNEL and f.detail.startswith("import ") and self._kernel_flag(test))],
                  "the import is guarded by a check that the package is installed")
        else_start = len(self.findings)
        self._visit_orelse(node)
        if not positive and self._false_only_with_cuda(test):
            # `if args.device < 0 or not torch.cuda.is_available(): cpu` then `else: cuda`
            self._cap(self.findings[else_start:], GUARDED)
        # `if not v.is_cuda: v = v.cuda()`: the branch taken without CUDA has its own
        # finding (it raises there), so the check adds no consequence of its own.
        if (checks and node.orelse and all(map(_device_test, checks)) and len(self.findings) == else_start
                and not _mentions_cpu(node)):
            # `if acc.device.type == "cuda" and fast_mm: <CUDA fast path> else: <portable path>`
            self._cap(checks, _FEATURE_GATE)
        taken = [] if not checks else self.findings[else_start:] if positive else (
            body if self._negates_cuda(test) else [])
        if checks and any(f.rule_id != CUDA_AVAILABILITY_CHECK and f.severity_cap is None for f in taken):
            self._cap(checks, _REPORTED_IN_BRANCH)
        if (body_findings and isinstance(test, ast.Compare) and not positive
                and any(string_value(side) is not None for side in (test.left, *test.comparators))
                and any(map(_names_tensorrt, node.body))):
            # `if fmt == "engine": ... check_version("tensorrt", ...)`: the user chose TensorRT
            self._cap(body_findings, _OPT_IN)
        gloo = _gloo_test(test)
        if gloo is not None:  # `if backend == "gloo": DDP(m) else: DDP(m, device_ids=[device])`
            branch = self.findings[else_start:] if gloo else self.findings[body_start:else_start]
            self._cap([f for f in branch if f.rule_id == CUDA_DEVICE_MANAGEMENT], _NOT_GLOO)
        if self._version_fallback(test):
            self._cap([f for f in self.findings[else_start:] if f.rule_id in _AMP_RULES], _OLD_TORCH)
        elif self._older_torch_test(test):
            self._cap([f for f in body_findings if f.rule_id in _AMP_RULES], _OLD_TORCH)
        if any(_OPT_IN_FLOAT64.search(name) for name in _names_in(test)):
            # `if isinstance(plugin, DoublePrecision): return torch.double`
            self._cap([f for f in body_findings if f.rule_id == FLOAT64], _ASKED_FLOAT64)

    def _visit_orelse(self, node: ast.If) -> None:
        start = len(self.findings)
        for statement in node.orelse:
            self.visit(statement)
        self._cap_dispatch_default(node, self.findings[start:])

    def _kernel_flag(self, test) -> bool:
        """``has_triton()``, ``_TRITON_AVAILABLE``, ``is_sm_at_least_90()``: true only where
        the Triton kernels can run (an availability or hardware check, or one of them and-ed)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(map(self._kernel_flag, test.values))
        if self.positive_cuda_query(test):
            return True
        target = test.func if isinstance(test, ast.Call) else test
        name = last_name(target)
        return "triton" in name.lower() and bool(_FEATURE_FLAG.search(name))

    def _nvidia_opt_in(self, test) -> bool:
        """``if self.nccl_ub:``, ``if use_sharp and ...:``, ``if cfg.cuda_graph_impl == "local":``:
        true only where the user asked for the NVIDIA feature (a flag, not a CUDA query)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(map(self._nvidia_opt_in, test.values))
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is, ast.In)):
            subject = test.left
        elif isinstance(test, ast.Call) and not test.args:
            subject = test.func  # `if self.use_cuda_graphs():`
        else:
            subject = test
        if not isinstance(subject, (ast.Name, ast.Attribute)):
            return False
        if isinstance(test, ast.Compare) and isinstance(test.comparators[0], ast.Attribute):
            # `amp_type == AMP_TYPE.APEX`: the value chosen names the feature
            return bool(_NVIDIA_OPT_IN.search(test.comparators[0].attr))
        name = subject.id if isinstance(subject, ast.Name) else subject.attr
        if _NVTX_AVAILABLE.search(name):
            return False  # `HAS_NVTX`: torch.cuda.nvtx imports on every build of torch, CUDA or not
        return bool(_NVIDIA_OPT_IN.search(name))

    def _negates_cuda(self, test) -> bool:
        """``not v.is_cuda``, alone or as one term of an ``and``: true wherever CUDA is absent
        (given the other terms)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(map(self._negates_cuda, test.values))
        try:
            return self._absent_cuda_query(test)
        except RecursionError:  # `x = x or y`: a name bound to an expression that holds it
            return False

    def _diagnostics_only(self, statements) -> bool:
        """Each statement logs, records a statistic or turns a flag off; one at least
        is about diagnostics (``log.info(...); self._log_peak_memory = False``)."""
        if not statements:
            return False
        about = False
        for statement in statements:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                if _diagnostic(statement.value.func):
                    about = True
                elif not self._is_message_call(statement.value):
                    return False
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and isinstance(statement.value, ast.Constant):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                about = about or any(map(_diagnostic, targets))
            elif not isinstance(statement, ast.Pass):
                return False
        return about

    def _messages_only(self, statements) -> bool:
        """Prints, logs, or builds the text of a message (``log_msg = sep.join([...])``):
        a check whose branches both do only this chooses what is said, nothing else."""
        def text(value) -> bool:
            if isinstance(value, (ast.Constant, ast.JoinedStr)):
                # `device = "cuda"` / `device = f"cuda:{rank}"`: a device, not words for a person
                head = value.value if isinstance(value, ast.Constant) else next(
                    (v.value for v in value.values[:1] if isinstance(v, ast.Constant)), "")
                # `backend = "nccl"` / `"gloo"`: a process-group backend chosen, not words for a person
                whole = value.value if isinstance(value, ast.Constant) else None
                return (isinstance(head, str) and not _NAMES_A_DEVICE.match(head)
                        and not (isinstance(whole, str) and _NAMES_A_BACKEND.fullmatch(whole)))
            return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in (
                "join", "format")
        return all((isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and self._is_message_call(s.value))
                   or (isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets) and text(s.value))
                   for s in statements)

    @staticmethod
    def _warns_and_skips(statements) -> bool:
        """``logger.warning("cannot restore the CUDA RNG"); continue``: the step that needs
        CUDA is skipped, and a warning says so."""
        *said, last = statements
        return bool(said) and isinstance(last, (ast.Continue, ast.Return)) and all(
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
            and s.value.func.attr in ("warning", "warn") for s in said)

    def _housekeeping_only(self, statements) -> bool:
        """``torch.cuda.empty_cache()``, ``gc.collect()``: releasing cached memory changes
        no result, so skipping it elsewhere costs memory at most."""
        return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                   and self.qualname(s.value.func) in _HOUSEKEEPING_CALLS for s in statements)

    def _syncs_only(self, statements) -> bool:
        return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                   and self.qualname(s.value.func) == "torch.cuda.synchronize" for s in statements)

    def _building(self) -> bool:
        """Inside the build of a CUDA extension: ``setup.py``, an op builder class,
        a compatibility check (where a CUDA check decides what to compile)."""
        return (self.path.replace("\\", "/").rsplit("/", 1)[-1] == "setup.py"
                or any(_BUILDER.search(name) for name in self.context_names))

    def _one_per_condition(self, start: int) -> None:
        """One CUDA check per condition (``if x.is_cuda and torch.cuda.is_available():``):
        the others become related locations of the one kept, the most severe."""
        checks = [f for f in self.findings[start:] if f.rule_id == CUDA_AVAILABILITY_CHECK]
        if len(checks) < 2:
            return
        kept = next((f for f in checks if f.severity_cap is None), checks[0])
        for finding in checks:
            if finding is not kept:
                kept.related.append(Related(finding.line, finding.column, finding.end_line, finding.end_column,
                                            f"same condition: {finding.detail}"))
        dropped = {id(f) for f in checks if f is not kept}
        self.findings[start:] = [f for f in self.findings[start:] if id(f) not in dropped]

    def visit_IfExp(self, node: ast.IfExp) -> None:
        if id(node) in self.claimed:
            return
        if self._device_choice(node, node):
            return
        if not self.positive_cuda_query(node.test):
            if self._keeps_float64(node) or self._mentions_other_accelerator([node.test]) or any(
                    _OPT_IN_FLOAT64.search(name) for name in _names_in(node.test)):
                # `torch.float32 if is_mps else torch.float64`: float64 is already avoided
                # where it is missing; `torch.float64 if self.double_precision else ...`: asked for.
                self.host.update(map(id, walk_nodes(node.body)))
                self.host.update(map(id, walk_nodes(node.orelse)))
            self.visit(node.test)
            self.visit(node.body)
            start = len(self.findings)
            self.visit(node.orelse)
            if self._false_only_with_cuda(node.test):  # `x if not torch.cuda.is_available() else x.cuda(i)`
                self._cap(self.findings[start:], GUARDED)
            if self._version_fallback(node.test):
                self._cap([f for f in self.findings[start:] if f.rule_id in _AMP_RULES], _OLD_TORCH)
            return
        start = len(self.findings)
        self.visit(node.test)
        self._one_per_condition(start)
        test_findings = self.findings[start:]
        body_start = len(self.findings)
        self.visit(node.body)
        self._cap(self.findings[body_start:], GUARDED)
        if self._mentions_other_accelerator([node.orelse]):
            self._cap(test_findings, _DISPATCH)
        self.visit(node.orelse)

    def visit_Try(self, node: ast.Try) -> None:
        """``try: import apex ... except ImportError:``: an optional dependency with a
        fallback; the import fails harmlessly where the package is missing."""
        optional = any(catches_a_missing_module(h.type) for h in node.handlers)
        start = len(self.findings)
        for statement in node.body:
            self.visit(statement)
        if optional:
            self._cap([f for f in self.findings[start:] if f.detail.startswith("import ")],
                      "an optional import with an ImportError fallback")
        # A log line in the probe (`log.info("CUDA works")`) is not work the probe guards.
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                             and self._is_message_call(s.value))]
        probe = len(body) == 1 or (len(body) <= 3 and all(
            isinstance(s, (ast.Import, ast.ImportFrom, ast.Assign, ast.Return)) for s in body))
        if len(body) < len(node.body):
            # with a log line, only a probe that answers whether the device works (`return True`):
            # `torch.load(...); log.info("resumed")` is work whose failure is swallowed
            probe = (probe and bool(body) and isinstance(body[-1], ast.Return)
                     and isinstance(body[-1].value, ast.Constant) and body[-1].value.value is True)
        if probe and any(self._probe_fallback(h) for h in node.handlers):
            # `try: return torch.cuda.nccl.version() except Exception: return None`
            self._cap(self.findings[start:], "a probe whose failure is caught, with a fallback value")
        newer_api = self._imports_a_device_generic_torch_api(node.body)
        for handler in node.handlers:
            start = len(self.findings)
            self.visit(handler)
            if newer_api and catches_a_missing_module(handler.type):
                # `try: from torch.amp.grad_scaler import GradScaler` / `except ImportError:
                # GradScaler = CudaGradScaler`: only a torch without the generic API fails the import
                self._cap(self.findings[start:], f"a fallback for a torch without {newer_api}, which a current "
                          "torch has: the handler does not run")
            elif self._catches_missing_api(handler.type):
                self._cap([f for f in self.findings[start:] if f.rule_id in _AMP_RULES
                           or f.detail.startswith("comparison with")],
                          "a fallback for older torch releases (inside `except AttributeError/TypeError`)")
        for part in (*node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try  # type: ignore[assignment]  # except* has the same fields as except

    @staticmethod
    def _probe_fallback(handler: ast.ExceptHandler) -> bool:
        """``except Exception: return None`` (or a constant, or pass): any failure gives a
        fallback value; nothing is raised again."""
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if not any(n is None or (getattr(n, "id", "") or getattr(n, "attr", "")) in _PROBE_FAILURES for n in names):
            return False
        return all(isinstance(s, ast.Pass) or (isinstance(s, (ast.Return, ast.Assign)) and (
            s.value is None or isinstance(s.value, (ast.Constant, ast.Tuple, ast.List))))
                   for s in handler.body)

    @staticmethod
    def _imports_a_device_generic_torch_api(body: list[ast.stmt]) -> str | None:
        """The module of ``from torch.amp import GradScaler`` when a try body is only imports of the
        device-generic API that current torch releases have (a module that is gone, such as
        ``torch._six``, fails on a current torch too, and its handler runs)."""
        if not body or not all(isinstance(s, ast.ImportFrom) and s.level == 0 and (
                s.module in _GENERIC_TORCH_MODULES
                or (s.module == "torch" and all(a.name in _GENERIC_TORCH_NAMES for a in s.names))) for s in body):
            return None
        first = body[0]
        assert isinstance(first, ast.ImportFrom)
        return first.module

    @staticmethod
    def _catches_missing_api(handler_type) -> bool:
        names = handler_type.elts if isinstance(handler_type, ast.Tuple) else [handler_type]
        return any(getattr(n, "id", "") in ("AttributeError", "TypeError") for n in names if n is not None)

    def _version_fallback(self, test) -> bool:
        """``if _TORCH_GREATER_EQUAL_2_4 ... else <old API>``: the else serves old torch only."""
        if isinstance(test, ast.Call):
            test = test.func
        name = last_name(test)
        return bool(_TORCH_VERSION_FLAG.search(name))

    def _older_torch_test(self, test) -> bool:
        """``version.parse(torch.__version__) < version.parse("2.4")``, ``not TORCH_2_4``:
        true only on torch releases older than the one named."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._version_fallback(test.operand)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE))):
            return False
        return any(self.qualname(n) == "torch.__version__" for n in walk_nodes(test.left) if isinstance(n, ast.Attribute))

    def visit_For(self, node) -> None:
        """``for i in range(torch.cuda.device_count()):`` runs its body only under CUDA."""
        iterator = node.iter
        guarded = self._ranges_over_cuda(iterator)
        if (isinstance(iterator, ast.Call) and isinstance(iterator.func, ast.Attribute)
                and iterator.func.attr in ("items", "values")
                and isinstance(iterator.func.value, (ast.Name, ast.Attribute))
                and _STATE_DICT.search(self._name_of(iterator.func.value))):
            # `for k, v in state_dict.items():` converting a checkpoint: its tensors were
            # loaded on the host (map_location="cpu"), so float64 there is host-side.
            # Not `model.state_dict().items()`: a model's own tensors are where it is.
            names = self.host_names.setdefault(self.scopes[-1], set())
            names.update(n.id for n in walk_nodes(node.target) if isinstance(n, ast.Name))
        self.visit(node.target)
        self.visit(iterator)
        start = len(self.findings)
        for statement in node.body:
            self.visit(statement)
        if guarded:
            self._cap(self.findings[start:], GUARDED)
        for statement in node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def _asks_only_safely(self, test, depth: int = 0) -> bool:
        """Every call in the condition (it runs at import, collected or not) answers without CUDA:
        ``torch.cuda.is_available()``, ``torch.cuda.device_count()``, directly or through a name."""
        for node in walk_nodes(test):
            if isinstance(node, ast.Name):
                value = self.resolve(node)
                if value is not None and (depth > 3 or not self._asks_only_safely(value, depth + 1)):
                    return False
            elif isinstance(node, ast.Call) and self.qualname(node.func) not in _SAFE_CUDA_QUERIES:
                return False
        return True

    def _ranges_over_cuda(self, iterator) -> bool:
        """``range(torch.cuda.device_count())``: no element without CUDA."""
        if not (isinstance(iterator, ast.Call) and getattr(iterator.func, "id", "") == "range" and iterator.args):
            return False
        arguments = iterator.args
        if len(arguments) == 3 and _negative_number(arguments[2]):
            # `range(torch.cuda.device_count(), 0, -1)`: from the count down, none without CUDA
            stop = arguments[1]
            return (self.positive_cuda_query(arguments[0]) and isinstance(stop, ast.Constant)
                    and isinstance(stop.value, int) and stop.value >= 0)
        stop = arguments[0] if len(arguments) == 1 else arguments[1]  # range(start, stop[, step])
        return self.positive_cuda_query(stop)

    def _visit_comprehension(self, node) -> None:
        """``any(torch.cuda.get_device_properties(i).major >= 8 for i in range(torch.cuda.device_count()))``
        computes its elements only under CUDA, as a ``for`` over that range runs its body, and
        ``any`` takes the empty answer.  A list kept for later (monai's ``[torch.device(f"cuda:{d}")
        for d in range(...)]``, then "No GPU devices available") stays reported."""
        if id(node) not in self.empty_safe or not any(self._ranges_over_cuda(g.iter) for g in node.generators):
            # `max(...)`, `[...][0]`, `torch.cat([...])` of no element raise where CUDA is absent
            self.generic_visit(node)
            return
        start = None
        for generator in node.generators:
            self.visit(generator.target)
            self.visit(generator.iter)
            if start is None and self._ranges_over_cuda(generator.iter):
                start = len(self.findings)
            for condition in generator.ifs:
                self.visit(condition)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self._cap(self.findings[start:], GUARDED)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension

    @staticmethod
    def _name_of(node) -> str:
        return last_name(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        guarded = False
        first = len(self.findings)
        for value in node.values:
            start = len(self.findings)
            self.visit(value)
            if guarded:
                self._cap(self.findings[start:], GUARDED)
            if isinstance(node.op, ast.And) and self.positive_cuda_query(value):
                guarded = True
            elif isinstance(node.op, ast.Or) and self._negates_cuda(value):
                guarded = True  # `not torch.cuda.is_available() or <reached only with CUDA>`
        # `accelerator == "cuda" or accelerator == "mps"`, `x.is_cuda or x.is_xpu`: a list of
        # backends, not a CUDA-only check.
        if isinstance(node.op, ast.Or):
            # `torch.cuda.is_available() or torch.xpu.is_available()`: another accelerator
            # is checked too, so the check is not CUDA-only (whichever kind it is).
            if any(not self.positive_cuda_query(value) and self._mentions_other_accelerator([value])
                   and not isinstance(value, ast.Constant) for value in node.values):
                self._cap([f for f in self.findings[first:] if f.rule_id == CUDA_AVAILABILITY_CHECK], LISTS_OTHERS)
            elif any(isinstance(value, ast.Compare) and any(OTHER_DEVICE_STRING.match(string_value(side) or "")
                                                            for side in (value.left, *value.comparators))
                     for value in node.values):
                self._cap([f for f in self.findings[first:] if _device_test(f)], LISTS_OTHERS)
        # `use_fused = fused_available and device_type == "cuda"`: the feature is optional
        # already, so the code has a path without it and CUDA only turns it on.
        if isinstance(node.op, ast.And):
            if any(map(_environment_opt_in, node.values)):  # `os.getenv("USE_CUDA_KERNELS") and cuda`
                self._cap([f for f in self.findings[first:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _FEATURE_GATE)
            elif any(map(self._optional_feature, node.values)):
                self._cap([f for f in self.findings[first:] if _device_test(f)], _FEATURE_GATE)
            if any(self._hip_build(value) for value in node.values):
                self._cap([f for f in self.findings[first:] if f.rule_id == CUDA_AVAILABILITY_CHECK], _ROCM_CHECK)

    def _hip_build(self, value) -> bool:
        """``torch.version.hip``, ``torch.version.hip is not None``: true only on a ROCm build."""
        if isinstance(value, ast.Compare) and len(value.ops) == 1 and isinstance(value.ops[0], ast.IsNot):
            value = value.left
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "bool"
                and len(value.args) == 1):  # bool(torch.version.hip)
            value = value.args[0]
        return self.qualname(value) == "torch.version.hip"

    def _optional_feature(self, value) -> bool:
        if self.positive_cuda_query(value):
            return False
        target = value.func if isinstance(value, ast.Call) else value
        name = last_name(target)
        return bool(_FEATURE_FLAG.search(name) or _BUILT_WITH_FLAG.fullmatch(name))

    # -- calls ---------------------------------------------------------------------------------

    def _is_message_call(self, node: ast.Call) -> bool:
        func = node.func
        name = last_name(func)
        if (self.qualname(func) or "").startswith("torch"):
            return False  # torch.log(...) computes; it prints nothing
        return name in _MESSAGE_FUNCTIONS or name.endswith(("Error", "Exception", "Warning"))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = last_name(func)
        if isinstance(func, ast.Name) and func.id in _TAKES_EMPTY and len(node.args) == 1:
            self.empty_safe.add(id(node.args[0]))
        if _DTYPE_FOR_DEVICE.search(name) and not (self.qualname(func) or "").startswith("torch."):
            # `maybe_adjust_dtype_for_device(torch.float64, x.device)`: the project's helper
            # picks the dtype per device (float32 where float64 is missing).
            start = len(self.findings)
            self.generic_visit(node)
            self._cap([f for f in self.findings[start:] if f.rule_id == FLOAT64],
                      "the dtype goes through a helper that adjusts it for the device")
            return
        if (isinstance(func, ast.Attribute) and func.attr == "param" and last_name(func.value) == "pytest"
                and (marks := keyword_value(node, "marks")) is not None and self.cuda_only_test(marks)):
            # `pytest.param(torch.device("cuda"), marks=pytest.mark.skipif(not has_cuda, ...))`: the
            # arguments are built when the module is imported, skipped or not, so only a device
            # name, a torch.device or a lambda waits for the test (`torch.ones(2).cuda()` fails
            # at collection and takes the module's CPU tests with it).
            start = len(self.findings)
            self.generic_visit(node)
            waiting = list(_built_harmlessly(node.args, self.qualname))
            self._cap([f for f in self.findings[start:] if any(_within(f, part) for part in waiting)], SKIPPED_TEST)
            return
        if self.skip_decorator(func) is not None:
            # `unittest.skipUnless(torch.cuda.device_count() > 1, ...)`: only decides whether a test runs.
            start = len(self.findings)
            self.generic_visit(node)
            self._cap(self.findings[start:], _DECIDES_SKIP)
            return
        if self._is_message_call(node):
            self.in_message += 1
            start = len(self.findings)
            self.generic_visit(node)
            self.in_message -= 1
            # `raise ValueError(f"... {torch.cuda.device_count()}")`: a query whose value is
            # only printed changes the text; a call that raises still raises.
            if name.endswith(("Error", "Exception")):  # printed output, by contrast, is the program's result
                targets = RULES_BY_ID[CUDA_DEVICE_STRING].severity.keys()
                self._cap([f for f in self.findings[start:] if finding_worst(f, targets) == "silent"], _MESSAGE_TEXT)
            return
        for claim in self.call_claims:
            if claim(self, node):
                return
        for observer in self.call_observers:
            observer(self, node)
        qualname = self.qualname(node.func)
        outer_start = len(self.findings)
        handled = bool(qualname and self._named_call(node, qualname))
        if not handled and isinstance(node.func, ast.Attribute) and not (
                qualname and qualname.startswith(("torch.", "torch_xla."))):
            handler = self.method_handlers.get(node.func.attr)
            if handler is not None:
                handler(self, node)
        elif not handled and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 3:
            key = string_value(node.args[1])
            if key:
                self._named_default(key, node.args[2], f"getattr default for {key}")
        self._keywords(node, qualname)
        if handled:
            outer = {(f.rule_id, f.line) for f in self.findings[outer_start:]}
            inner_start = len(self.findings)
            for child in node.args + [kw.value for kw in node.keywords]:
                self.visit(child)
            # `torch.cuda.stream(torch.cuda.Stream())`: one change on one line, reported once
            self._cap([f for f in self.findings[inner_start:] if (f.rule_id, f.line) in outer], _SAME_CALL)
        else:
            self.generic_visit(node)

    def _keywords(self, node: ast.Call, qualname: str | None) -> None:
        torch_call = bool(qualname and qualname.startswith("torch")) or (
            isinstance(node.func, ast.Attribute) and node.func.attr == "to")
        handlers = self.keyword_handlers
        for kw in node.keywords:
            handler = handlers.get(kw.arg)
            if handler is not None:
                handler(self, node, kw, torch_call)

    def _option_default(self, node: ast.Call) -> None:
        """argparse / click / optparse: the default is where the user changes it."""
        names = [string_value(a) or "" for a in node.args]
        name = max(names, key=len) if names else ""
        self._named_default(name, keyword_value(node, "default"), f"default of {name}")

    def _mapping_default(self, node: ast.Call) -> None:
        """``config.get("device", "cuda")``."""
        if len(node.args) == 2 and (key := string_value(node.args[0])):
            self._named_default(key, node.args[1], f"default for {key}")

    METHODS = {"add_argument": "_option_default", "option": "_option_default",
               "add_option": "_option_default", "get": "_mapping_default", "pop": "_mapping_default",
               "setdefault": "_mapping_default"}

    def _named_call(self, node: ast.Call, qualname: str) -> bool:
        """Calls recognised by their qualified name.  True when the callee was reported."""
        handler = self.call_handlers.get(qualname)
        if handler is not None:
            return handler(self, node, qualname)
        for matches, handler in self.call_prefix_handlers:
            if matches(qualname):
                return handler(self, node, qualname)
        rule_id = reference_rule(qualname)
        if rule_id:
            if not (rule_id == FLOAT64 and id(node) in self.host):
                self.report(rule_id, node.func, f"{qualname}()")
            return True
        return False
