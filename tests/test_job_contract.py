"""One job contract: each command parses its app spec once and preflights it
once in the parent; the stages and the worker jobs receive the parsed record
(``AppSpec``), which crosses the process boundary as a plain dict.

The commands run for real, in process (``torchport.cli.main``), with real
workers; the counts are the parent's own (``torchport.app.SPEC_WORK``, and for
``hf:`` specs counting wrappers around ``hf.parse``/``hf.resolve`` that call
through)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import APPS, QUICK_TIMING
from torchport import app as app_module
from torchport import hf
from torchport.app import AppSpec, parse_spec, preflight

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
SMALL_GPT2 = "hf:gpt2?n_layer=1&n_embd=32&n_head=2&vocab_size=128"
PATH_APP = str(APPS / "compare_tiny.py")
QUICK_CHECK = ["--only", "parity", "--steps", "2"]


@pytest.fixture
def counted(monkeypatch):
    """The parent's app-spec work during one command: parses, preflights, and
    for hf: specs the calls into ``hf.parse`` and ``hf.resolve`` (transformers)."""
    counts: dict[str, int] = {"hf.parse": 0, "hf.resolve": 0}
    for name in ("parse", "resolve"):
        real = getattr(hf, name)

        def calling_through(*args, _real=real, _name=name, **kwargs):
            counts[f"hf.{_name}"] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(hf, name, calling_through)
    app_module.SPEC_WORK.clear()

    def read() -> dict[str, int]:
        return {"parse": app_module.SPEC_WORK["parse"], "preflight": app_module.SPEC_WORK["preflight"], **counts}

    return read


def _command(name: str, app: str, tmp_path: Path, hf_spec: bool) -> list[str]:
    sizes = ["--batch-size", "2", "--seq-len", "8"] if hf_spec else []
    if name == "evaluate":
        # The default stages (trace, checks) run, where a builtin app's evaluation takes them along.
        stages = [] if app.startswith("builtin:") else ["--no-checks"]
        return ["evaluate", app, *sizes, "-b", "cpu", *QUICK_TIMING, *stages, "--out-dir", str(tmp_path / "out")]
    if name == "check":
        return ["check", app, *sizes, "-b", "cpu", *QUICK_CHECK, "--format", "json",
                "--output", str(tmp_path / "checks.json")]
    return ["trace", app, *sizes, "--steps", "1", "--no-live", "--format", "json",
            "--output", str(tmp_path / "trace.json")]


APPS_UNDER_TEST = [
    pytest.param("builtin:classifier", id="builtin"),
    pytest.param(PATH_APP, id="path"),
    pytest.param(SMALL_GPT2, id="hf", marks=pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")),
]


@pytest.mark.parametrize("command", ["evaluate", "check", "trace"])
@pytest.mark.parametrize("app", APPS_UNDER_TEST)
def test_each_command_parses_and_preflights_its_app_once(command, app, tmp_path, counted, capsys):
    from torchport.cli import main

    hf_spec = app.startswith("hf:")
    status = main(_command(command, app, tmp_path, hf_spec))
    assert status == 0, capsys.readouterr().err
    counts = counted()
    assert (counts["parse"], counts["preflight"]) == (1, 1), counts
    # hf: the spec text is split once (by the parse) and resolved against transformers once (by the preflight).
    assert (counts["hf.parse"], counts["hf.resolve"]) == ((1, 1) if hf_spec else (0, 0)), counts
    written = tmp_path / "out" / "result.json" if command == "evaluate" else next(tmp_path.glob("*.json"))
    document = json.loads(written.read_text(encoding="utf-8"))
    if command == "evaluate":
        ran = document["backends"]["cpu"]["runs"][0]
        assert ran["status"] == "ok", ran.get("error")
        # The worker's record of the app is the spec's text, batch options folded in.
        assert ran["config"]["app"] == document["app"]["spec"] == parse_spec(app, *((2, 8) if hf_spec else ())).text
        if app.startswith("builtin:"):
            assert document["trace"]["status"] == "complete" and document["checks"]["checks"]
    elif command == "check":
        assert document["checks"] and document["config"]["app"].startswith(app.split("?")[0])
    else:
        assert document["status"] == "complete"


def test_the_spec_crosses_the_process_boundary_as_a_plain_dict():
    for text in ("builtin:gpt?size=124m", "some/dir/app.py:make", "package.module:factory", SMALL_GPT2):
        spec = parse_spec(text)
        data = json.loads(json.dumps(spec.to_dict()))
        again = AppSpec.from_dict(data)
        assert again == spec and again.to_dict() == spec.to_dict()
    folded = AppSpec.from_dict(json.loads(json.dumps(parse_spec(SMALL_GPT2, 3, None).to_dict())))
    assert (folded.hf.batch_size, folded.hf.seq_len) == (3, hf.DEFAULT_SEQ_LEN)
    assert folded.text == "hf:gpt2?n_layer=1&n_embd=32&n_head=2&vocab_size=128&batch_size=3&seq_len=64"


def test_a_checked_spec_is_not_checked_again(counted):
    checked = preflight(parse_spec("builtin:classifier"))
    assert checked.preflighted and preflight(checked) is checked
    assert (counted()["parse"], counted()["preflight"]) == (1, 1)
