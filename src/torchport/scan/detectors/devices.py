"""TP0xx, where tensors live: device strings, ``.cuda()``, CUDA-only checks, device
index management, device properties, legacy CUDA tensor types."""
from __future__ import annotations

import ast
import re

from torchport.scan.detectors.shared import CUDA_DEVICE, CUDA_ONLY_KERNEL, DEVICE_NAME, HELPER_NAME, LISTS_OTHERS
from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import (
    attribute_token,
    call_argument,
    character_column,
    closing_paren,
    insert_at,
    kernel_device_arguments,
    kernel_devices,
    keyword_value,
    last_name,
    method_token,
    node_end,
    node_start,
    plain_call,
    replace_node,
    string_value,
    walk_nodes,
)
from torchport.scan.model import Edit
from torchport.scan.rules import (
    CUDA_AVAILABILITY_CHECK,
    CUDA_DEVICE_MANAGEMENT,
    CUDA_DEVICE_PROPERTIES,
    CUDA_DEVICE_STRING,
    CUDA_TENSOR_TYPE,
    DOT_CUDA,
    TORCH_XLA_API,
)

RULE_IDS = (CUDA_DEVICE_STRING, DOT_CUDA, CUDA_AVAILABILITY_CHECK, CUDA_DEVICE_MANAGEMENT,
            CUDA_DEVICE_PROPERTIES, CUDA_TENSOR_TYPE,
            TORCH_XLA_API)  # an "xla" device string is a device string first

_XLA_DEVICE = re.compile(r"xla(?::\d+)?\Z")
# torch.amp.custom_fwd / custom_bwd and a project's wrappers of them (torch-harmonics' _custom_setup_context)
_AUTOCAST_STATE = re.compile(r"custom_(?:fwd|bwd|setup_context)", re.I)
_AUTOCAST_STATE_REASON = ("the CUDA autocast state an autograd Function records and restores: it works "
                          "without CUDA and casts nothing (no cast_inputs=)")
_AUTOCAST_CASTS_REASON = ("the inputs an autograd Function casts under CUDA autocast (cast_inputs=): it works "
                          "without CUDA, but another accelerator's autocast leaves them uncast")
_BUILT_FORMAT = re.compile(r"cuda:\{\d*\}\Z")
_BUILT_PERCENT = re.compile(r"cuda:%[dis]\Z")

# torch.cuda.X -> (rule, torch.<replacement>, min torch) for 1:1 renames.
CUDA_RENAMES: dict[str, tuple[str, str, str]] = {
    "device_count": (CUDA_DEVICE_MANAGEMENT, "accelerator.device_count", "2.6"),
    "current_device": (CUDA_DEVICE_MANAGEMENT, "accelerator.current_device_index", "2.6"),
    "set_device": (CUDA_DEVICE_MANAGEMENT, "accelerator.set_device_index", "2.6"),
    "device": (CUDA_DEVICE_MANAGEMENT, "accelerator.device_index", "2.8"),
}
# torch.cuda.X -> rule, for the names without a safe rewrite.
CUDA_NAMES: dict[str, str] = {
    "is_available": CUDA_AVAILABILITY_CHECK, "device_of": CUDA_DEVICE_MANAGEMENT,
    **dict.fromkeys(("get_device_name", "get_device_properties", "get_device_capability",
                     "get_arch_list", "is_bf16_supported", "is_tf32_supported"), CUDA_DEVICE_PROPERTIES),
}


def cuda_type_rule(name: str) -> str | None:
    """torch.cuda.FloatTensor, torch.cuda.ByteStorage: the legacy typed constructors."""
    return CUDA_TENSOR_TYPE if name.endswith(("Tensor", "Storage")) else None


def rule_for_name(qualname: str) -> str | None:
    return CUDA_AVAILABILITY_CHECK if qualname == "torch.version.cuda" else None


class DeviceDetector(AnalyzerState):
    CALLS = {"torch.device": "_torch_device", "torch.set_default_device": "_set_default_device",
             "torch.library.custom_op": "_kernel_registration", "torch.library.register_kernel": "_kernel_registration",
             "torch.library.impl": "_kernel_registration"}
    METHODS = {"cuda": "_dot_cuda", "to": "_dot_to", "register_kernel": "_kernel_registration_method"}
    KEYWORDS = {"device": "_device_keyword", "map_location": "_device_keyword",
                "device_type": "_device_type_keyword"}
    CALL_CLAIMS = ("_built_device_string",)
    CALL_OBSERVERS = ("_positional_device",)
    COMPARED_STRINGS = ("_compared_device",)
    NAMED_DEFAULTS = (("device", "_device_default"),)
    ASSIGNMENTS = ("_assigned_device",)
    ATTRIBUTES = {"is_cuda": "_is_cuda_attribute"}

    def _device_literal(self, node, as_string: bool, what: str) -> bool:
        """Report a "cuda"/"cuda:N"/"xla" literal, or a "cuda:" string built at run time,
        used as a device; True if reported."""
        if node is None or id(node) in self.claimed:
            return False
        if self._built_device_string(node):
            return True
        value = string_value(node)
        if value is None:
            return False
        match = CUDA_DEVICE.match(value)
        if match:
            index = match.group(1)
            if as_string and index is not None:
                self.report(CUDA_DEVICE_STRING, node, f'"{value}" {what}')
            else:
                self.report(CUDA_DEVICE_STRING, node, f'"{value}" {what}',
                            [replace_node(node, self.device(index, as_string))], "2.6", uses_device=True,
                            uses_helper=index is not None and not as_string)
            return True
        if _XLA_DEVICE.match(value):
            self.report(TORCH_XLA_API, node, f'"{value}" {what}')
            return True
        return False

    def _built_device_string(self, node) -> bool:
        """f"cuda:{rank}", "cuda:{}".format(i), "cuda:" + str(k), "cuda:%d" % k: reported
        at the expression; the fix replaces only "cuda" so the result stays a string of
        the same shape for whichever accelerator is present."""
        if id(node) in self.claimed or self.in_message:
            return False
        edit = None
        if isinstance(node, ast.JoinedStr):
            if not (len(node.values) == 2 and string_value(node.values[0]) == "cuda:"
                    and isinstance(node.values[1], ast.FormattedValue)):
                return False
            line = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
            start = character_column(line, node.col_offset) - 1
            prefix = line[start:start + 8]
            offset = prefix.find("cuda:")
            if 0 < offset <= 3 and "{" not in prefix[:offset]:
                column = node.col_offset + offset
                edit = Edit((node.lineno, column), (node.lineno, column + 4), f"{{{DEVICE_NAME}.type}}")
            shape = 'f"cuda:{...}"'
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and string_value(node.left) == "cuda:":
            edit = replace_node(node.left, f'{DEVICE_NAME}.type + ":"')
            shape = '"cuda:" + ...'
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
              and _BUILT_PERCENT.match(text := string_value(node.left) or "")):
            edit = replace_node(node.left, f'({DEVICE_NAME}.type + "{text[4:]}")')
            shape = f'"{text}" % ...'
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
              and _BUILT_FORMAT.match(text := string_value(node.func.value) or "")):
            literal = node.func.value
            edit = replace_node(literal, f'({DEVICE_NAME}.type + "{text[4:]}")')
            shape = f'"{text}".format(...)'
        else:
            return False
        self.report(CUDA_DEVICE_STRING, node, f"device string built at run time: {shape}",
                    [edit] if edit else None, "2.6", uses_device=True)
        self.claimed.update(map(id, walk_nodes(node)))
        return True

    def _device_use(self, node, what: str) -> None:
        """A plain name used as a device: report at its definition (where the user
        changes it), with this use as a second location."""
        definition = self.resolve(node)
        if definition is None:
            return
        finding = self.by_node.get(id(definition))
        if finding is None and self._device_literal(definition, as_string=True, what="assigned to a name"):
            finding = self.by_node.get(id(definition))
        if finding is not None and finding.rule_id == CUDA_DEVICE_STRING:
            self._relate(finding, node, f"{node.id} used {what}")

    def _unfixed_device(self, argument) -> bool:
        definition = self.resolve(argument)
        if definition is None:
            return False
        finding = self.by_node.get(id(definition))
        return finding is not None and finding.fix is None

    def _device_default(self, default, where: str) -> None:
        self._device_literal(default, as_string=True, what=where)

    def _assigned_device(self, name: str, value) -> None:
        self._device_literal(value, as_string=True, what="assigned to a name")

    def _device_keyword(self, node: ast.Call, kw: ast.keyword, torch_call: bool) -> None:
        if (not self._device_literal(kw.value, as_string=not torch_call, what=f"{kw.arg}=")
                and isinstance(kw.value, ast.Name)):
            self._device_use(kw.value, f"as {kw.arg}=")

    def _device_type_keyword(self, node: ast.Call, kw: ast.keyword, torch_call: bool) -> None:
        self._device_literal(kw.value, as_string=True, what="device_type=")
        finding = self.by_node.get(id(kw.value))
        names = [last_name(node.func)]
        if names[0] == "partial" and node.args:  # partial(torch.amp.custom_fwd, device_type="cuda")
            names.append(last_name(node.args[0]))
        if (finding is not None and finding.rule_id == CUDA_DEVICE_STRING and finding.severity_cap is None
                and any(_AUTOCAST_STATE.fullmatch(name.strip("_")) for name in names)):
            # `@torch.amp.custom_fwd(device_type="cuda")`: the CUDA autocast state an autograd
            # Function runs with.  Nothing fails without CUDA; the inputs it casts under CUDA
            # autocast (cast_inputs=) are not cast under another accelerator's, as with
            # `torch.cuda.amp.custom_fwd` (TP203); without cast_inputs it casts nothing anywhere.
            casts = keyword_value(node, "cast_inputs")
            if ((casts is not None and not (isinstance(casts, ast.Constant) and casts.value is None))
                    or any(k.arg is None for k in node.keywords)  # `**amp_kwargs` may hold cast_inputs
                    or (names[0] == "partial" and self._mentions_cast_inputs())):
                # (a partial's calls may add cast_inputs=)
                finding.severity_cap, finding.cap_reason = "silent", _AUTOCAST_CASTS_REASON
            else:
                finding.severity_cap, finding.cap_reason = "info", _AUTOCAST_STATE_REASON

    def _mentions_cast_inputs(self) -> bool:
        if self._cast_inputs_named is None:
            self._cast_inputs_named = any("cast_inputs" in line for line in self.lines)
        return self._cast_inputs_named

    def _kernel_registration(self, node: ast.Call, qualname: str = "") -> bool:
        """``@torch.library.custom_op("lib::op", mutates_args=(), device_types="cuda")``,
        ``@op.register_kernel("cuda")``, ``@torch.library.impl(lib, "op", "CUDA")``: the op gets a
        kernel for CUDA alone, and a call of it with tensors on another device finds none.  The
        device string is the line to change (register a kernel for the others too); the kernel's
        body runs only for CUDA tensors (policy.py lowers what is in it).  Not rewritten: the
        kernel is CUDA code, registering it for another device would not port it.  A list
        (``["cuda"]``) is reported as a list of CUDA devices already."""
        devices = kernel_devices(node)
        if devices and all(device == "cuda" for device in devices):
            for argument in kernel_device_arguments(node) or ():
                value = string_value(argument)
                if value is not None and id(argument) not in self.claimed:
                    self.report(CUDA_DEVICE_STRING, argument, f'"{value}": {CUDA_ONLY_KERNEL}')
        return False  # the call's arguments are visited as usual

    def _kernel_registration_method(self, node: ast.Call) -> None:
        self._kernel_registration(node)

    def _compared_device(self, element, value: str, lists_others: bool) -> bool:
        if not CUDA_DEVICE.match(value):
            return False
        finding = self.report(CUDA_AVAILABILITY_CHECK, element, f'comparison with "{value}"')
        if lists_others:
            self._cap([finding], LISTS_OTHERS)
        return True

    def _is_cuda_attribute(self, node: ast.Attribute) -> None:
        if (id(node) not in self.claimed and isinstance(node.ctx, ast.Load) and not self.own_is_cuda
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            self.report(CUDA_AVAILABILITY_CHECK, node, ".is_cuda", at=attribute_token(node))

    def _positional_device(self, node: ast.Call) -> None:
        """``Trainer(model, "cuda")`` where this file defines ``Trainer.__init__(self,
        model, device)``: a device string given to a parameter named for a device."""
        if not isinstance(node.func, ast.Name) or not any(
                CUDA_DEVICE.match(string_value(a) or "") for a in node.args):
            return
        definition = self.definition(node.func.id)
        offset = 0
        if isinstance(definition, ast.ClassDef):
            definition = next((s for s in definition.body if isinstance(s, ast.FunctionDef)
                               and s.name == "__init__"), None)
            offset = 1
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        parameters = [a.arg for a in (*definition.args.posonlyargs, *definition.args.args)][offset:]
        for argument, parameter in zip(node.args, parameters):
            if "device" in parameter.lower() and CUDA_DEVICE.match(string_value(argument) or ""):
                self._device_literal(argument, as_string=True, what=f"as {parameter} of {node.func.id}()")

    def _device_collection(self, node) -> None:
        """``("cuda:0",) + args``, ``devices = ["cuda:0", "cuda:1"]``: a tuple or list of CUDA
        device strings only (one with "cpu" or other values is a set of choices or a record)."""
        if self.in_message or id(node) in self.table_entries:
            return
        values = [string_value(e) for e in node.elts]
        # Every element a CUDA device string: `return "cuda", count` is a (name, count) pair.
        if not values or not all(v is not None and CUDA_DEVICE.match(v) for v in values):
            return
        kind = "tuple" if isinstance(node, ast.Tuple) else "list"
        for element, value in zip(node.elts, values):
            if id(element) not in self.claimed:
                # Not rewritten: whether the list names the device to use or the device
                # kinds something supports is not in the syntax.
                self.report(CUDA_DEVICE_STRING, element, f'"{value}" in a {kind}')

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._device_collection(node)
        self.dtype_collection(node)
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        self._device_collection(node)
        self.dtype_collection(node)
        self.generic_visit(node)

    def visit_Set(self, node: ast.Set) -> None:
        self.dtype_collection(node)
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if not self._built_device_string(node):
            self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not self._built_device_string(node):
            self.generic_visit(node)

    def _device_choice(self, expression: ast.IfExp, replaced) -> bool:
        """`"cuda" if torch.cuda.is_available() else "cpu"` (or with torch.device on
        both sides): the accelerator with a CPU fallback, which is exactly the device line."""
        test = expression.test
        if not (isinstance(test, ast.Call) and self.qualname(test.func) == "torch.cuda.is_available"):
            return False

        def kind(node, wanted) -> str | None:
            value = string_value(node)
            if value is not None:
                return "str" if value == wanted else None
            if (isinstance(node, ast.Call) and self.qualname(node.func) == "torch.device"
                    and len(node.args) == 1 and not node.keywords and string_value(node.args[0]) == wanted):
                return "device"
            return None

        body, orelse = kind(expression.body, "cuda"), kind(expression.orelse, "cpu")
        if body is None or body != orelse:
            return False
        as_string = body == "str" and replaced is expression
        self.report(CUDA_AVAILABILITY_CHECK, expression, "device chosen by torch.cuda.is_available()",
                    [replace_node(replaced, self.device(as_string=as_string))], "2.6", uses_device=True)
        self.claimed.update(map(id, walk_nodes(expression)))
        return True

    def _dot_to(self, node: ast.Call) -> None:
        if (node.args and not self._device_literal(node.args[0], as_string=False, what="in .to()")
                and isinstance(node.args[0], ast.Name)):
            self._device_use(node.args[0], "in .to()")

    def _dot_cuda(self, node: ast.Call) -> None:
        func = node.func
        end_line, end_column = node_end(func)
        rename = Edit((end_line, end_column - len("cuda")), (end_line, end_column), "to")
        keywords_ok = plain_call(node) and all(kw.arg != "device" for kw in node.keywords)
        edits = None
        # The script's own `device = torch.device(...)` when it has one, so a run on
        # the CPU stays on the CPU.
        own_device = self.device_type_expression(node)[0] == "device.type"
        target = "device" if own_device else DEVICE_NAME
        if keywords_ok and not node.args:
            if node.keywords:
                edits = [rename, insert_at(node_start(node.keywords[0]), f"{target}, ")]
            else:
                edits = [rename, insert_at(closing_paren(node), target)]
        elif keywords_ok and len(node.args) == 1:
            # `.cuda(x)` takes an int, a "cuda:N" string or a torch.device: the helper
            # accepts each (torch.device(type, x) raises for the last two).
            index = node.args[0]
            edits = [rename, insert_at(node_start(index), f"{HELPER_NAME}("), insert_at(node_end(index), ")")]
        self.report(DOT_CUDA, node, ".cuda()", edits, "2.6", uses_device=not (own_device and not node.args),
                    at=method_token(node), uses_helper=bool(node.args))

    def _set_default_device(self, node: ast.Call, qualname: str) -> bool:
        if node.args:
            self._device_literal(node.args[0], as_string=False, what="default device")
        return False

    def _cuda_is_available_call(self, node: ast.Call, qualname: str) -> bool:
        if id(node) not in self.claimed:
            self.report(CUDA_AVAILABILITY_CHECK, node, "torch.cuda.is_available()")
        return True

    def _torch_device(self, node: ast.Call, qualname: str) -> bool:
        if node.args and isinstance(node.args[0], ast.IfExp):
            if self._device_choice(node.args[0], node):
                self.claimed.update(map(id, walk_nodes(node.args[0])))
                return True
            return False
        device_type = call_argument(node, 0, "type")
        value = string_value(device_type)
        if value is None:
            if isinstance(device_type, ast.Name):
                self._device_use(device_type, "in torch.device()")
            return False
        match = CUDA_DEVICE.match(value)
        if match and len(node.args) == 1 and not node.keywords:
            self.report(CUDA_DEVICE_STRING, device_type, f'torch.device("{value}")',
                        [replace_node(node, self.device(match.group(1)))], "2.6", uses_device=True,
                        uses_helper=match.group(1) is not None)
            self.claimed.add(id(device_type))
            return True
        self._device_literal(device_type, as_string=True, what="in torch.device()")
        return False
