"""One report model, three renderings: the terminal summary, report.md and
report.html list the same backends under each section (measured, does not run
here, stopped by the budget, stages that could not finish, script mode),
because report.model decides them once.

The documents come from real evaluations: an app that fails only when
compiled (cpu-compile does not run here), a budget too small for one backend,
a training script, and the built-in example.  The stage error is the one entry
the harness cannot be made to produce on demand: it is added to a copy of the
built-in example's document exactly as evaluate records a stage that raised."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from rich.console import Console

from conftest import QUICK, load_result, run_torchport
from torchport import formatting as fmt
from torchport import summary
from torchport.document import result_record
from torchport.records import ResultDocument
from torchport.report import html, markdown, model, terminal
from torchport.report.svg import esc

APPS = Path(__file__).parent / "apps"
SCRIPTS = Path(__file__).parent / "scripts"


def _terminal_text(document: ResultDocument) -> str:
    console = Console(width=1000, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    terminal.print_summary(document, console)
    return console.export_text()


def _md_section(md: str, heading: str) -> str:
    start = md.find(f"\n{heading}\n")
    if start < 0:
        return ""
    end = md.find("\n## ", start + len(heading) + 2)
    return md[start:end if end >= 0 else None]


def _html_section(page: str, heading: str) -> str:
    start = page.find(f"<h2>{heading}</h2>")
    if start < 0:
        return ""
    end = page.find("<h2>", start + 4)
    return page[start:end if end >= 0 else None]


def _md_table_backends(section: str) -> set[str]:
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| backend")]
    return {row.split("|")[1].strip().replace("\\", "") for row in rows}


def assert_same_sections(document: dict) -> model.Sections:
    document = summary.refresh(result_record(document))
    parts = model.sections(document)
    md, page, term = markdown.render(document), html.render(document), _terminal_text(document)
    names = list(document.backends)

    # Measured: the throughput tables and the terminal table's rows that carry a step time.
    assert _md_table_backends(_md_section(md, "## Training throughput (sustained)")) == set(parts.measured)
    figures = _html_section(page, "Figures")
    assert {name for name in names if f"<td>{name}</td>" in figures or f"<td>{name} (proxy" in figures} \
        == set(parts.measured)
    ok_rows = {name for name in names for line in term.splitlines()
               if line.strip("│ ").startswith(name + " ") and " ok " in line}
    assert ok_rows == set(parts.measured)

    # Does not run here.
    assert _md_table_backends(_md_section(md, "## Does not run here")) == set(parts.does_not_run_here)
    assert set(re.findall(r"<h3>([^<:]+): ", _html_section(page, "Does not run here"))) == set(parts.does_not_run_here)
    assert {name for name in names if f"{name}: does not run here" in term} == set(parts.does_not_run_here)

    # Stopped by the budget: named in the budget section, never under "does not run here".
    for name in names:
        line = f"{name}: budget too small"
        stopped = name in parts.budget_too_small
        assert (line in _md_section(md, "## Time budget and precision")) == stopped, name
        assert (line in _html_section(page, "Time budget and precision")) == stopped, name
        assert (line in term) == stopped, name

    # Stages that could not finish.
    for error in parts.stage_errors:
        line = f"{error.stage}: {error.message}"
        assert fmt.md(error.message) in _md_section(md, "## Stages that could not finish")
        assert esc(line) in _html_section(page, "Stages that could not finish")
        assert f"stage {line}" in term
    if not parts.stage_errors:
        assert "Stages that could not finish" not in md + page and "stage could not finish" not in term

    # Script mode has its section in each.
    if document.script:
        assert "## Script mode" in md and "<h2>Script mode</h2>" in page
        verdicts = document.script.verdicts
        assert verdicts and all(f"script {name}: " in term for name in verdicts)
        assert all(name in _md_section(md, "## Script mode") and name in _html_section(page, "Script mode")
                   for name in verdicts)
    return parts


@pytest.fixture(scope="module")
def failed_when_compiled(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("model") / "compile-crash"
    done = run_torchport("evaluate", str(APPS / "check_compile_crash.py"), "-b", "cpu,cpu-compile", *QUICK,
                         "-o", str(out))
    assert done.returncode in (0, 1), done.stderr
    return load_result(out)


def test_a_backend_that_fails_is_listed_alike(failed_when_compiled):
    parts = assert_same_sections(failed_when_compiled)
    assert set(parts.measured) == {"cpu"} and set(parts.does_not_run_here) == {"cpu-compile"}


@pytest.mark.alone
def test_a_budget_too_small_is_never_does_not_run_here(budget_too_small_evaluation):
    out, done = budget_too_small_evaluation  # the run test_budget checks too (conftest)
    assert done.returncode == 0, done.stderr
    parts = assert_same_sections(load_result(out))
    assert set(parts.budget_too_small) == {"cpu-compile"} and not parts.does_not_run_here


def test_a_stage_error_is_listed_alike(builtin_evaluation):
    document = copy.deepcopy(load_result(builtin_evaluation))
    document["stage_errors"] = [{"stage": "trace", "message": "RuntimeError: planted <b>|stage</b> failure",
                                 "location": None}]
    parts = assert_same_sections(document)
    assert [e.stage for e in parts.stage_errors] == ["trace"]


def test_a_script_run_is_listed_alike(tmp_path):
    out = tmp_path / "script"
    done = run_torchport("evaluate", "--script", str(SCRIPTS / "ignores_device.py"), "-b", "cpu,cpu-compile",
                         "--repeats", "1", "--steps", "6", "--blocks", "2", "--max-warmup", "6", "--no-trace",
                         "--no-checks", "-o", str(out), timeout=400)
    assert done.returncode in (0, 1), done.stderr
    parts = assert_same_sections(load_result(out))
    assert parts.measured
