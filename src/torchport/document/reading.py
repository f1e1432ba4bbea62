"""Reading a result document: one strict reader for every command."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from torchport.document.schema import check_schema
from torchport.document.versions import check_version
from torchport.records import ResultDocument

# Integers beyond this cannot be a count, a size or a time torchport wrote,
# and would overflow the statistics (float range).
LARGEST_NUMBER = 2**63


def read_document(path: Path) -> dict[str, Any]:
    """A result document from a file, checked against the schema: anything
    that is not one gets one line naming what is wrong (exit status 2)."""
    document = read_json(path)
    check_version(document, str(path))
    check_schema(document, str(path))
    return document


def result_record(document: dict[str, Any]) -> ResultDocument:
    """A document already read (and checked) as one record: what the report
    layer, the summaries and the comparison read.  Its ``to_dict`` is the
    document again, keys in the same order."""
    return ResultDocument.from_dict(document)


def read_json(path: Path) -> dict[str, Any]:
    """The strict reader every command uses for a result file: UTF-8, strict
    JSON, an object at the top, every number finite and at most
    ``LARGEST_NUMBER``; anything else is one line naming the file (exit 2)."""
    from torchport.errors import UserError

    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"result file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"result path is a folder, not a result.json: {path}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not a JSON result document: not UTF-8 text (byte {exc.start})", location=where) from None
    except OSError as exc:
        raise UserError(f"cannot read result file: {exc.strerror or exc}", location=where) from None
    try:
        document = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise UserError(f"not a JSON result document: {exc.msg}", location=f"{path}:{exc.lineno}") from None
    except RecursionError:
        raise UserError("not a result document: JSON nested too deeply", location=where) from None
    except ValueError as exc:  # NaN/Infinity, 1e999, or an integer of thousands of digits
        raise UserError(f"not a result document: {exc}", location=where) from None
    if not isinstance(document, dict):
        raise UserError(f"not a result document: the top level is a JSON {_json_type(document)}, not an object",
                        location=where)
    _check_numbers(document, where)
    return document


def _finite_float(text: str) -> float:
    # 1e999 is valid JSON but becomes inf, which no statistic may see.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range (result files hold finite numbers)")
    return value


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON (result files are strict JSON)")


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _check_numbers(value: Any, where: str, path: str = "") -> None:
    from torchport.errors import UserError

    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{at}/{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}/{i}") for i, v in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > LARGEST_NUMBER:
            raise UserError(f"not a result document: the number at {at or '(root)'} has {len(str(abs(item)))} digits",
                            location=where)
        elif isinstance(item, float) and abs(item) > LARGEST_NUMBER:
            raise UserError(f"not a result document: the number at {at or '(root)'} ({item:.3g}) is out of range",
                            location=where)
