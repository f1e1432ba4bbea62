"""The vocabulary of statuses and error kinds, and the record machinery every record shares."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Self, TypeVar

# --- the vocabulary --------------------------------------------------------------------------------


class Vocabulary(StrEnum):
    """A closed set of words that appear in result documents; members compare
    equal to their words (``RunStatus.OK == "ok"``)."""

    def __str__(self) -> str:
        return str(self.value)


class ErrorKind(Vocabulary):
    """Why a run failed (torchport.failures sorts exceptions into these)."""

    UNSUPPORTED_OP = "unsupported-op"
    COMPILE_ERROR = "compile-error"
    OUT_OF_MEMORY = "out-of-memory"
    NUMERICAL = "numerical"
    CRASH = "crash"
    TIMEOUT = "timeout"
    APP_ERROR = "app-error"
    ENVIRONMENT = "environment"
    INTERRUPTED = "interrupted"
    BUDGET_TOO_SMALL = "budget-too-small"
    # Script mode: the run finished, but nothing of it ran on the backend's device (the script ignored it).
    NOT_ON_DEVICE = "not-on-device"


class RunStatus(Vocabulary):
    """One worker run of one backend."""

    OK = "ok"
    ERROR = "error"
    CRASHED = "crashed"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"
    RUNNING = "running"


class BackendStatus(Vocabulary):
    """All of one backend's runs together."""

    PENDING = "pending"
    OK = "ok"
    UNAVAILABLE = "unavailable"
    ERROR = "error"
    CRASHED = "crashed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"


class DocumentStatus(Vocabulary):
    """The whole evaluation."""

    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class CheckStatus(Vocabulary):
    PASS = "pass"
    BORDERLINE = "borderline"  # inside the band between pass and fail; not a failure of the command
    FAIL = "fail"
    ERROR = "error"
    SKIPPED = "skipped"
    NOT_APPLICABLE = "not_applicable"


class TraceStatus(Vocabulary):
    """A trace section: every requested step traced, some, or none."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    FAILED = "failed"


class TraceVerdictStatus(Vocabulary):
    """The trace's verdict on one target, worst first."""

    BLOCKED = "blocked"
    SLOW = "slow"
    UNKNOWN = "unknown"
    RUNS = "runs"


class OpStatus(Vocabulary):
    """What one traced op does on a target."""

    NATIVE = "native"
    DECOMPOSED = "decomposed"
    FALLBACK = "fallback"
    MISSING = "missing"
    UNKNOWN = "unknown"
    CUSTOM = "custom"


class TraceSeverity(Vocabulary):
    """A trace finding's consequence on one target, mildest first."""

    MINOR = "minor"
    SLOW = "slow"
    BLOCKER = "blocker"


# --- the record machinery --------------------------------------------------------------------------

@dataclass
class Record:
    """Base of every record: keys it does not declare, and the order the keys came in."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)
    # The keys of the dictionary it was read from, in order; None: built in code.
    key_order: tuple[str, ...] | None = field(default=None, kw_only=True, compare=False, repr=False)

    # field name -> record class of its value (one record, or a list / dict of them)
    _records: ClassVar[dict[str, type[Record]]] = {}
    _record_lists: ClassVar[dict[str, type[Record]]] = {}
    _record_maps: ClassVar[dict[str, type[Record]]] = {}
    # field name -> the Vocabulary its value is a word of
    _words: ClassVar[dict[str, type[Vocabulary]]] = {}
    _written_when_none: ClassVar[frozenset[str]] = frozenset()

    # class -> its declared field names, as a tuple and a set: read for every record read or written, and
    # dataclasses.fields() per call made a trace section's records three times slower to read and write.
    _field_names: ClassVar[dict[type, tuple[tuple[str, ...], frozenset[str]]]] = {}

    @classmethod
    def _declared(cls) -> tuple[str, ...]:
        return cls._fields_of()[0]

    @classmethod
    def _declared_set(cls) -> frozenset[str]:
        return cls._fields_of()[1]

    @classmethod
    def _fields_of(cls) -> tuple[tuple[str, ...], frozenset[str]]:
        found = Record._field_names.get(cls)
        if found is None:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "key_order"))
            found = Record._field_names[cls] = (names, frozenset(names))
        return found

    @classmethod
    def _read(cls, name: str, value: Any) -> Any:
        if value is None:
            return None
        if name in cls._records:
            return cls._records[name].from_dict(value)
        if name in cls._record_lists:
            return [cls._record_lists[name].from_dict(item) for item in value]
        if name in cls._record_maps:
            return {key: cls._record_maps[name].from_dict(item) for key, item in value.items()}
        if name in cls._words:
            words = cls._words[name]
            return words(value) if value in words._value2member_map_ else value  # an unknown word is kept as text
        return value

    @staticmethod
    def _write(value: Any) -> Any:
        if isinstance(value, Record):
            return value.to_dict()
        if isinstance(value, Vocabulary):
            return value.value
        if isinstance(value, list):
            return [Record._write(item) for item in value]
        if isinstance(value, dict):
            return {key: Record._write(item) for key, item in value.items()}
        return value

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        declared = cls._declared_set()
        values = {key: cls._read(key, value) for key, value in data.items() if key in declared}
        extra = {key: value for key, value in data.items() if key not in declared}
        return cls(**values, extra=extra, key_order=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        declared = self._declared_set()
        present = set(self.key_order or ())
        order = list(self.key_order or ()) + [key for key in [*self._declared(), *self.extra] if key not in present]
        out: dict[str, Any] = {}
        for key in order:
            if key in self.extra and key not in declared:
                kept = self.extra[key]  # as read, or a record put under a key the class does not declare
                out[key] = kept.to_dict() if isinstance(kept, Record) else kept
                continue
            if key not in declared:
                continue
            value = getattr(self, key)
            if key not in present:
                if self.key_order is not None and value == self._default(key):
                    continue  # read from a dictionary that did not have it, and not set since
                if value is None and key not in self._written_when_none:
                    continue
            out[key] = self._write(value)
        return out

    def put(self, **values: Any) -> Self:
        """Set fields (or keys of ``extra``) as a dictionary's keys are set.  On
        a record read from a dictionary each is written, None included, and
        one that dictionary did not have is written after the keys it had, in
        the order set here (the order the document had when it was a dictionary)."""
        declared = self._declared_set()
        for key, value in values.items():
            if key in declared:
                setattr(self, key, value)
            else:
                self.extra[key] = value
            if self.key_order is not None and key not in self.key_order:
                self.key_order = (*self.key_order, key)
        return self

    @classmethod
    def _default(cls, name: str) -> Any:
        found = next(f for f in dataclasses.fields(cls) if f.name == name)
        if found.default_factory is not dataclasses.MISSING:
            return found.default_factory()
        return None if found.default is dataclasses.MISSING else found.default


FiguresT = TypeVar("FiguresT", bound="Figures")


@dataclass
class Figures(Record):
    """A check's figures.  ``begin()`` gives an empty one to fill with ``put``."""

    @classmethod
    def begin(cls) -> Self:
        return cls(key_order=())
