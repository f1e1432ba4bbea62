"""torch.compile observability: what Dynamo did per phase on a *-compile
backend, measured in a real worker with a real torch.compile, read back from
the result and the report."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import APPS, load_result, run_torchport

BRANCH_APP = APPS / "compile_branch_flip.py"


def _line_of(path: Path, marker: str) -> int:
    return next(number for number, text in enumerate(path.read_text().splitlines(), 1) if marker in text)


@pytest.fixture
def branch_run(branch_flip_evaluation) -> Path:
    """The branch app on cpu-compile (conftest; its trace stage is test_trace_compile_check's)."""
    return branch_flip_evaluation


def test_graph_break_recorded_with_reason_and_user_line(branch_run):
    run = load_result(branch_run)["backends"]["cpu-compile"]["runs"][0]
    first = run["training"]["counters"]["first_step"]["torch_compile"]
    branch_line = f"{BRANCH_APP}:{_line_of(BRANCH_APP, '# BRANCH')}"
    sites = first["graph_break_sites"]
    assert [site["location"] for site in sites] == [branch_line], sites
    assert sites[0]["reason"].startswith("Data-dependent branching")
    assert first["graph_breaks"] == 1
    # forward up to the branch, and the branch taken in steps 1-2 (a resume frame)
    assert first["frames_compiled"] == 2


def test_flip_at_step_3_and_partial_batch_compile_in_warmup_not_in_sustained(branch_run):
    run = load_result(branch_run)["backends"]["cpu-compile"]["runs"][0]
    counters = run["training"]["counters"]
    warmup = counters["warmup"]["torch_compile"]
    # step 3 takes the other branch: a frame first compiled then; step 8's partial batch recompiles.
    assert warmup["frames_compiled"] >= 2, warmup
    guards = [item["guard"] for item in warmup["recompilation_causes"]]
    assert warmup["recompilations"] == len(guards) >= 1
    assert any("size mismatch at index 0. expected 8, actual 5" in guard for guard in guards), guards
    assert any(item["location"].startswith(str(BRANCH_APP)) for item in warmup["recompilation_causes"])
    # warm-up blocks of 2 steps from step 2: the ones holding steps 3 and 8 compiled (never steady)
    assert [bool(block["compilations"]) for block in run["training"]["warmup"]["blocks"]][:4] == [True, False, False, True]
    assert "recompiling during warm-up" in " ".join(load_result(branch_run)["backends"]["cpu-compile"]["summary"]["notes"])
    sustained = counters["sustained"]["torch_compile"]
    assert (sustained["frames_compiled"], sustained["recompilations"], sustained["graph_breaks"]) == (0, 0, 0)
    assert run["training"]["sustained_compilations"] == 0


def test_report_section_names_reason_line_and_guard(branch_run):
    report = (branch_run / "report.md").read_text()
    section = report.split("## torch.compile counters", 1)[1].split("\n## ", 1)[0]
    assert f"`{BRANCH_APP}:{_line_of(BRANCH_APP, '# BRANCH')}`" in section
    assert "Data-dependent branching" in section
    assert "size mismatch at index 0. expected 8, actual 5" in section
    assert "| cpu-compile | sustained |" in section


def test_eager_backend_has_no_torch_compile_counters(tmp_path):
    out = tmp_path / "run"
    completed = run_torchport("evaluate", str(BRANCH_APP), "-b", "cpu", "--repeats", "1", "--steps", "2",
                              "--blocks", "1", "--max-warmup", "2", "--no-inference", "--no-trace", "--no-checks",
                              "-o", str(out))
    assert completed.returncode == 0, completed.stderr[-3000:]
    counters = load_result(out)["backends"]["cpu"]["runs"][0]["training"]["counters"]
    assert all("torch_compile" not in counters[phase] for phase in ("first_step", "warmup", "sustained"))
    assert "## torch.compile counters" not in (out / "report.md").read_text()
