"""TP4xx, distributed, data loading and environment: the NCCL process-group backend,
pinned host memory, non-blocking copies to the host, CUDA_VISIBLE_DEVICES."""
from __future__ import annotations

import ast
import re

from torchport.scan.detectors.shared import DEVICE_NAME
from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import (
    call_argument,
    insert_at,
    keyword_value,
    method_token,
    node_end,
    replace_node,
    string_value,
)
from torchport.scan.rules import (
    CUDA_DEVICE_MANAGEMENT,
    CUDA_VISIBLE_DEVICES,
    NCCL_BACKEND,
    NON_BLOCKING_COPY,
    PIN_MEMORY,
)

RULE_IDS = (NCCL_BACKEND, PIN_MEMORY, NON_BLOCKING_COPY, CUDA_VISIBLE_DEVICES,
            CUDA_DEVICE_MANAGEMENT)  # DDP's device_ids= are CUDA device indices

# torch.cuda.X -> rule
CUDA_NAMES: dict[str, str] = {"nccl": NCCL_BACKEND}

_OTHER_VISIBLE_DEVICES = re.compile(r"(?:HIP|ROCR|ZE_AFFINITY|ASCEND_RT|HABANA|NEURON_RT|MLU)_?\w*(?:VISIBLE|MASK)")
_PROCESS_GROUP = {"torch.distributed.init_process_group", "torch.distributed.new_group",
                  "torch.distributed.distributed_c10d.init_process_group",
                  "torch.distributed.distributed_c10d.new_group",
                  "torch.distributed.new_subgroups"}


def rule_for_name(qualname: str) -> str | None:
    if qualname in ("torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"):
        return NCCL_BACKEND
    return None


_DDP = {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}


class DistributedDetector(AnalyzerState):
    CALLS = {**dict.fromkeys(_PROCESS_GROUP, "_process_group"), **dict.fromkeys(_DDP, "_ddp_device_ids")}
    TRIGGER_WORDS = ("device_ids",)
    METHODS = {"pin_memory": "_dot_pin_memory"}
    KEYWORDS = {"non_blocking": "_non_blocking_keyword", "pin_memory": "_pin_memory_keyword",
                "pin_memory_device": "_pin_memory_device_keyword"}
    STRINGS = (("CUDA_VISIBLE_DEVICES", "_visible_devices_string"),)  # torchport: ignore
    COMPARED_STRINGS = ("_compared_backend",)
    NAMED_DEFAULTS = (("backend", "_backend_default"),)
    ASSIGNMENTS = ("_assigned_backend",)

    def _backend_default(self, node, where: str) -> None:
        """A "nccl" default for something named *backend*: reported where it is set."""
        value = string_value(node)
        if value and id(node) not in self.claimed and "nccl" in re.split(r"[:,]", value):  # torchport: ignore
            self.report(NCCL_BACKEND, node, f'"{value}" as {where}', *self._chosen_backend(node), uses_device=True)

    def _chosen_backend(self, node) -> tuple[list | None, str]:
        """The rewrite of a plain "nccl" constant: the backend that fits the device
        present ("nccl" where CUDA is, "gloo" on the CPU)."""
        if string_value(node) != "nccl":  # torchport: ignore
            return None, "2.6"
        return [replace_node(node, f"{self.T}.distributed.get_default_backend_for_device({DEVICE_NAME})")], "2.6"

    def _assigned_backend(self, name: str, value) -> None:
        if "backend" in name.lower():
            self._backend_default(value, f"value of {name}")

    def _compared_backend(self, element, value: str, lists_others: bool) -> bool:
        if "nccl" not in value.split(":")[-1].split(","):  # torchport: ignore
            return False
        # Reading the backend only chooses a branch; the branch runs only under NCCL.
        finding = self.report(NCCL_BACKEND, element, f'comparison with "{value}"')
        self._cap([finding], "a comparison only chooses a branch; nothing selects NCCL here")
        return True

    def _process_group(self, node: ast.Call, qualname: str) -> bool:
        position = 0 if qualname.endswith("init_process_group") else None
        backend = call_argument(node, position, "backend")
        value = self.constant_value(backend) if backend is not None else None
        if not value or "nccl" not in re.split(r"[:,]", value):  # torchport: ignore
            return False
        if string_value(backend) == "nccl":  # torchport: ignore
            self.report(NCCL_BACKEND, backend, '"nccl" backend', *self._chosen_backend(backend), uses_device=True)
            return False
        definition = self.resolve(backend)
        finding = self.by_node.get(id(definition)) if definition is not None else None
        if finding is None and definition is not None and id(definition) not in self.claimed:
            # Reported where the user would change it: the assignment or default.
            edits, need = self._chosen_backend(definition)
            finding = self.report(NCCL_BACKEND, definition, f'backend "{value}"', edits, need, uses_device=True)
        if finding is not None:
            self._relate(finding, backend, f"used by {qualname.rsplit('.', 1)[-1]}()")
        else:
            self.report(NCCL_BACKEND, backend, f'backend "{value}"')
        return False

    def _ddp_device_ids(self, node: ast.Call, qualname: str) -> bool:
        """``DistributedDataParallel(model, device_ids=[local_rank])``: CUDA indices, which
        DDP refuses for a module on the CPU.  The fix passes them only where an
        accelerator holds the module."""
        device_ids = keyword_value(node, "device_ids")  # the keyword: the fast path finds it by its name
        if device_ids is None or isinstance(device_ids, ast.IfExp) or (
                isinstance(device_ids, ast.Constant) and device_ids.value is None):
            return False  # absent, None, or already chosen by a condition
        if isinstance(device_ids, ast.Name):
            decided = self.resolve(device_ids)
            helper = str(getattr(decided, "func", None) and (
                getattr(decided.func, "attr", None) or getattr(decided.func, "id", "")))
            if isinstance(decided, ast.IfExp) or (isinstance(decided, ast.Call) and "device_ids" in helper.lower()):
                return False  # `device_ids = self.determine_ddp_device_ids()`: None for a CPU module
        edits = None
        if isinstance(device_ids, (ast.List, ast.Tuple)) and not any(
                isinstance(e, ast.Starred) for e in device_ids.elts):
            edits = [insert_at(node_end(device_ids), f' if {DEVICE_NAME}.type != "cpu" else None')]
        self.report(CUDA_DEVICE_MANAGEMENT, device_ids, "device_ids= of DistributedDataParallel", edits, "2.6",
                    uses_device=True)
        return False

    def _visible_devices_string(self, node: ast.Constant, value: str) -> None:
        if value == "CUDA_VISIBLE_DEVICES" or value.startswith("CUDA_VISIBLE_DEVICES="):  # torchport: ignore
            finding = self.report(CUDA_VISIBLE_DEVICES, node, '"CUDA_VISIBLE_DEVICES"')
            if _OTHER_VISIBLE_DEVICES.search(self.lines[node.lineno - 1]):
                # `{"HIP_VISIBLE_DEVICES": mask, "CUDA_VISIBLE_DEVICES": mask}`: each vendor's variable
                finding.severity_cap, finding.cap_reason = "info", "the same line sets another vendor's variable too"

    def _dot_pin_memory(self, node: ast.Call) -> None:
        if not node.args:
            self.report(PIN_MEMORY, node, ".pin_memory()", at=method_token(node))

    def _non_blocking_keyword(self, node: ast.Call, kw: ast.keyword, torch_call: bool) -> None:
        if isinstance(kw.value, ast.Constant) and kw.value.value is True and self._copies_to_host(node):
            self.report(NON_BLOCKING_COPY, kw, "non_blocking=True copy to the host")

    def _pin_memory_keyword(self, node: ast.Call, kw: ast.keyword, torch_call: bool) -> None:
        if isinstance(kw.value, ast.Constant) and kw.value.value is True:
            self.report(PIN_MEMORY, kw, "pin_memory=True")

    def _pin_memory_device_keyword(self, node: ast.Call, kw: ast.keyword, torch_call: bool) -> None:
        self.report(PIN_MEMORY, kw, "pin_memory_device=")

    def _copies_to_host(self, node: ast.Call) -> bool:
        """``.to("cpu", non_blocking=True)``: the one non-blocking copy whose result
        can be read before it has arrived."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "to"):
            return False
        device = node.args[0] if node.args else keyword_value(node, "device")
        return self.constant_value(device) == "cpu"
