"""The result document: what it is, which versions torchport reads, and how a
file becomes one.

One JSON document per evaluation (``result.json``), described by
``torchport/schemas/result.schema.json`` with every registered stage's section
merged in.  Where a newcomer finds what:

- ``versions``: the schema version written (``SCHEMA_VERSION``), the versions
  read (``READABLE_SCHEMA_VERSIONS``) and what each version added;
- ``schema``: the schema itself (``load_schema``) and validation against it
  (``validate``; ``check_schema`` turns a mismatch into one line for the user);
- ``reading``: the strict reader every command uses (``read_json``),
  ``read_document``, which also checks the version and the schema, and
  ``result_record``, the document as the record the report layer reads;
- ``create``: a new, empty document for an evaluation (``new_document``).

Writing a document (atomically) and the output folder's lock are in
``torchport.results``; the machine facts in a document's ``environment`` are
in ``torchport.environment``.
"""
from __future__ import annotations

from torchport.document.create import new_document, now
from torchport.document.reading import LARGEST_NUMBER, read_document, read_json, result_record
from torchport.document.schema import SCHEMA_PATH, check_schema, load_schema, validate
from torchport.document.versions import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION, check_version, readable

__all__ = [
    "LARGEST_NUMBER", "READABLE_SCHEMA_VERSIONS", "SCHEMA_PATH", "SCHEMA_VERSION", "check_schema", "check_version",
    "load_schema", "new_document", "now", "read_document", "read_json", "readable", "result_record", "validate",
]
