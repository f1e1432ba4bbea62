"""``torch.autocast("cuda", enabled=self.amp and x.is_cuda)``: autocast switched on only where
the tensors are already on CUDA.  Elsewhere the code's own ``enabled`` test turns it off, so the
model runs in its own dtype by the author's choice; the line chooses no device and, off CUDA,
behaves as a disabled autocast on any device would.  A test that is true off CUDA too
(``enabled=device.type != "cpu"``, true on MPS) is no such gate and keeps the finding."""
from __future__ import annotations

import ast

from torchport.scan.old_torch_branch import statements_holding
from torchport.scan.detectors.syntax import walk_nodes


def _is_cuda_test(node: ast.expr) -> bool:
    """``x.is_cuda``, ``x.device.type == "cuda"``, ``"cuda" == device.type``."""
    if isinstance(node, ast.Attribute) and node.attr == "is_cuda":
        return True
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        sides = (node.left, node.comparators[0])
        return any(isinstance(s, ast.Constant) and s.value == "cuda" for s in sides)
    return False


def enabled_only_on_cuda(tree: ast.Module, line: int) -> str | None:
    """The ``enabled=`` source when an autocast call on ``line`` is enabled only under a test that
    the tensors or the device are CUDA (the test alone, or one operand of an ``and``)."""
    holding = statements_holding(tree, line)
    if not holding:
        return None
    statement = holding[-1]
    header = statement.items if isinstance(statement, (ast.With, ast.AsyncWith)) else [statement]
    for node in (n for h in header for n in walk_nodes(h)):
        if not (isinstance(node, ast.Call) and node.lineno == line and "autocast" in ast.unparse(node.func)):
            continue
        enabled = next((k.value for k in node.keywords if k.arg == "enabled"), None)
        if enabled is None:
            continue
        operands = enabled.values if isinstance(enabled, ast.BoolOp) and isinstance(enabled.op, ast.And) else [enabled]
        if any(_is_cuda_test(o) for o in operands):
            return ast.unparse(enabled)
    return None
