"""The result document's JSON Schema and validation against it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).parents[1] / "schemas" / "result.schema.json"


def load_schema() -> dict[str, Any]:
    """The result schema, with the section schema of every registered stage
    (``torchport.stages``) merged in as ``$defs/<key>``, the key it sets."""
    from torchport import stages

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    for key in stages.result_keys():
        schema["$defs"][key] = stages.by_key(key).schema_fragment()
        schema["properties"].setdefault(key, {"$ref": f"#/$defs/{key}"})
    return schema


def validate(document: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when the document does not match."""
    import jsonschema

    jsonschema.validate(document, load_schema())


def check_schema(document: dict[str, Any], where: str) -> None:
    """One line naming where the document first departs from the schema."""
    from torchport.errors import UserError

    try:
        validate(document)
    except RecursionError:
        raise UserError("not a result document: nested too deeply", location=where) from None
    except Exception as exc:  # jsonschema.ValidationError
        at = "/".join(str(p) for p in getattr(exc, "absolute_path", [])) or "(root)"
        message = str(getattr(exc, "message", exc)).splitlines()[0][:300]
        raise UserError(f"does not match the result schema at {at}: {message}", location=where) from None
