"""The stage registry (torchport.stages): a stage added as one registry entry,
its module (typed options, run, render) and its schema file runs in a real
evaluation, lands under its key, is checked against its schema and is rendered
in report.md; the registry's own stages resolve."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from torchport import stages
from torchport.document import validate
from torchport.evaluate import Evaluation, EvaluationOptions
from torchport.protocol import ProtocolConfig
from torchport.records import BackendStatus, Record, ResultDocument

APPS = Path(__file__).resolve().parent / "apps"
QUICK = ProtocolConfig(steps=2, blocks=1, max_warmup_steps=0, inference=False)


@dataclass(frozen=True)
class DemoOptions:
    seed: int

    @classmethod
    def from_evaluation(cls, options: Any) -> DemoOptions:
        return cls(seed=options.protocol.seed)


@dataclass
class DemoSection(Record):
    backends_ok: list[str] = field(default_factory=list)
    seed: int = 0


def demo_run(document: ResultDocument, options: Any, out_dir: Path) -> None:
    mine = DemoOptions.from_evaluation(options)
    document.put(demo_section=DemoSection(backends_ok=sorted(n for n, b in document.backends.items()
                                                             if b.status == BackendStatus.OK), seed=mine.seed))


def demo_markdown(section: DemoSection) -> str:
    return f"## Demo stage\n\nbackends that ran: {', '.join(section.backends_ok)}"


def test_every_registered_stage_resolves():
    evaluation_options = EvaluationOptions(app="builtin:classifier", script=Path("train.py"), protocol=QUICK)
    for stage in stages.STAGES:
        assert callable(stage.runner())
        assert stage.options_for(evaluation_options).seed == QUICK.seed
        assert stage.schema_fragment()["type"] == ["object", "null"]
        assert stage.render is None or callable(stage.renderer())
    assert {s.name for s in stages.for_evaluation(False, set())} == {"trace", "checks"}
    assert {s.name for s in stages.for_evaluation(True, {"checks"})} == {"script-trace"}
    assert stages.for_evaluation(False, {"trace", "checks"}) == []


def test_a_stage_added_in_the_registry_runs_validates_and_renders(tmp_path, monkeypatch):
    schema = tmp_path / "demo.schema.json"
    schema.write_text(json.dumps({"type": ["object", "null"], "required": ["backends_ok", "seed"],
                                  "properties": {"seed": {"type": "integer"}}}))
    demo = stages.Stage(name="demo", key="demo_section", mode="app", switch="demo", options=f"{__name__}:DemoOptions",
                        run=f"{__name__}:demo_run", render=f"{__name__}:demo_markdown", schema=str(schema),
                        section=f"{__name__}:DemoSection")
    monkeypatch.setattr(stages, "STAGES", stages.STAGES + (demo,))
    chosen = stages.for_evaluation(False, {"trace", "checks"})
    assert chosen == [demo]
    options = EvaluationOptions(app=str(APPS / "spine_tiny.py"), backends=["cpu"], repeats=1, protocol=QUICK,
                                out_dir=tmp_path / "out", stages=chosen, command=["pytest"])
    evaluation = Evaluation(options)
    try:
        document = evaluation.run().to_dict()
        report = evaluation.write_report().read_text()
    finally:
        evaluation.close()
    assert document["demo_section"] == {"backends_ok": ["cpu"], "seed": 0}
    validate(document)  # the registry's schema file is merged in under the stage's key
    assert "## Demo stage" in report and "backends that ran: cpu" in report
    document["demo_section"]["seed"] = "zero"
    with pytest.raises(jsonschema.ValidationError):
        validate(document)
