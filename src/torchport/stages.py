"""Every stage of ``torchport evaluate``, registered in one place.

A stage runs after the timing rounds, in a thread of its own, and sets one key
of the result document.  Each entry says, for its stage:

* ``name``: how progress lines, ``stage_errors`` and ``--skip-stage`` call it;
* ``key``: the key of the result document it sets;
* ``mode``: ``"app"`` or ``"script"``: which kind of evaluation runs it;
* ``switch``: the group a ``--no-trace`` / ``--no-checks`` flag turns off;
* ``options``: ``module:Class``, its typed options (a dataclass with
  ``from_evaluation(EvaluationOptions)``): what it reads of the evaluation;
* ``run``: ``module:function(document, evaluation_options, out_dir)``: it puts
  its section (a record) into the document (a ``ResultDocument``);
* ``render``: ``module:function(section record) -> markdown``, or None when the
  section is rendered by another (script mode's sections are in the script's
  own part of the report);
* ``schema``: the file under ``schemas/`` holding the JSON Schema of its key;
* ``section``: ``module:Class``, the record of its key, for a key that
  ``torchport.records.ResultDocument`` does not declare (the run puts one, the
  renderer draws one); None: the document declares it;
* ``cost``: ``module:object``, its ``torchport.planning.StageCost``: what it
  needs at least and how it sizes itself for the time left, for the time
  budget; None: it is not sized and always runs.

Adding a stage: its module (options, run, render, cost), its schema file, and
one entry here.  Modules are named as text and imported when the stage runs, so
that importing this registry costs nothing (the parent process imports no
torch).

Stdlib only.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Callable

if TYPE_CHECKING:
    from torchport.planning import StageCost
    from torchport.records import Record, ResultDocument


class StageRun(Protocol):
    """A stage's run function: it puts its section, a record, into the result document's record."""

    def __call__(self, document: ResultDocument, options: Any, out_dir: Path) -> None: ...

SCHEMA_FOLDER = Path(__file__).resolve().parent / "schemas"


@dataclass(frozen=True)
class Stage:
    name: str
    key: str
    mode: str
    switch: str
    options: str
    run: str
    render: str | None
    schema: str
    cost: str | None = None
    section: str | None = None

    def runner(self) -> StageRun:
        return _resolve(self.run)

    def options_for(self, evaluation_options: Any) -> Any:
        """This stage's typed options, read from the evaluation's."""
        return _resolve(self.options).from_evaluation(evaluation_options)

    def renderer(self) -> Callable[[Record], str] | None:
        """The markdown of the stage's section, drawn from its record (``ResultDocument.section``)."""
        return _resolve(self.render) if self.render else None

    def section_record(self) -> type[Record] | None:
        return _resolve(self.section) if self.section else None

    def cost_model(self) -> StageCost | None:
        return _resolve(self.cost) if self.cost else None

    def schema_fragment(self) -> dict[str, Any]:
        return json.loads((SCHEMA_FOLDER / self.schema).read_text(encoding="utf-8"))


STAGES: tuple[Stage, ...] = (
    Stage(name="trace", key="trace", mode="app", switch="trace",
          options="torchport.trace.stage:TraceStageOptions", run="torchport.trace.stage:evaluate_stage",
          render="torchport.trace.report:markdown", schema="trace.schema.json",
          cost="torchport.trace.stage:COST"),
    Stage(name="checks", key="checks", mode="app", switch="checks",
          options="torchport.check.stage:CheckStageOptions", run="torchport.check.stage:evaluate_stage",
          render="torchport.check.report:markdown", schema="checks.schema.json",
          cost="torchport.check.stage:COST"),
    Stage(name="script-trace", key="trace", mode="script", switch="trace",
          options="torchport.script.stage:ScriptStageOptions", run="torchport.script.stage:trace_stage",
          render="torchport.trace.report:markdown", schema="trace.schema.json",
          cost="torchport.script.cost:TRACE_COST"),
    Stage(name="script-distributed", key="script_distributed", mode="script", switch="checks",
          options="torchport.script.stage:ScriptStageOptions", run="torchport.script.stage:distributed_stage",
          render=None, schema="script_distributed.schema.json", cost="torchport.script.cost:DISTRIBUTED_COST"),
)


def for_evaluation(script_mode: bool, skipped: set[str]) -> list[Stage]:
    """The stages an evaluation runs: those of its mode, less those whose
    name or switch is in ``skipped``."""
    mode = "script" if script_mode else "app"
    return [stage for stage in STAGES
            if stage.mode == mode and stage.name not in skipped and stage.switch not in skipped]


def names() -> list[str]:
    return list(dict.fromkeys(stage.name for stage in STAGES))


def result_keys() -> list[str]:
    """The document keys the stages set, once each, in registry order."""
    return list(dict.fromkeys(stage.key for stage in STAGES))


def by_key(key: str) -> Stage:
    """The first stage registered for a document key (its renderer and schema
    serve every stage that sets that key)."""
    return next(stage for stage in STAGES if stage.key == key)


def name_of(stage: Any) -> str:
    """A registered stage's name (also for its bare run function:
    ``torchport.check.stage:evaluate_stage`` -> ``checks``), or a plain stage
    function's package name."""
    registered = _registered(stage)
    return registered.name if registered else stage.__module__.rsplit(".", 2)[-2]


def _registered(stage: Any) -> Stage | None:
    if isinstance(stage, Stage):
        return stage
    path = f"{stage.__module__}:{getattr(stage, '__name__', '')}"
    return next((entry for entry in STAGES if entry.run == path), None)


def cost_of(stage: Any) -> StageCost | None:
    """The cost model of a registered stage (also given as its bare run function); None for another."""
    registered = _registered(stage)
    return registered.cost_model() if registered is not None else None


def run_function(stage: Any) -> StageRun:
    return stage.runner() if isinstance(stage, Stage) else stage


def _resolve(path: str) -> Any:
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)
