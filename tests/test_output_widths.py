"""Every command's text output fits an 80- and a 120-column terminal: run for
real with COLUMNS set, no stdout line may be longer than the width."""
from __future__ import annotations

import pytest

from conftest import APPS, QUICK, run_torchport

WIDTHS = (80, 120)
APP = str(APPS / "compare_tiny.py")
# Short lines, so that the diff `fix` prints (the user's code, never folded) fits too.
LOCKED_IN = """import torch

model = torch.nn.Linear(4, 4).cuda()
if torch.cuda.is_available():
    torch.backends.cudnn.benchmark = True
x = torch.randn(2, 4, device="cuda")
"""


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """One small evaluation, reused by report and compare."""
    out = tmp_path_factory.mktemp("widths") / "run"
    done = run_torchport("evaluate", APP, "-b", "cpu,cpu-compile", *QUICK, "--out-dir", str(out), "-q",
                         env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr[-3000:]
    # evaluate's own summary, at 80 columns (report prints the same at both widths below).
    assert max(len(line) for line in done.stdout.splitlines()) <= 80, done.stdout
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    (root / "train.py").write_text(LOCKED_IN)
    return root


COMMANDS = {
    "backends": lambda run, project: ["backends"],
    "env list": lambda run, project: ["env", "list"],
    "info": lambda run, project: ["info"],
    "rules": lambda run, project: ["rules"],
    "rules ID": lambda run, project: ["rules", "TP001"],
    "scan": lambda run, project: ["scan", str(project)],
    "fix": lambda run, project: ["fix", str(project)],
    "report": lambda run, project: ["report", str(run / "result.json")],
    "compare": lambda run, project: ["compare", str(run / "result.json"), str(run / "result.json")],
    "memory": lambda run, project: ["memory", "builtin:classifier", "--dtype", "float32", "--dtype", "bfloat16"],
    "trace": lambda run, project: ["trace", APP],
    "check": lambda run, project: ["check", APP, "-b", "cpu,cpu-compile", "--only", "parity,checkpoint", "--steps", "4"],
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_text_output_fits_the_width(command, width, evaluated, project):
    done = run_torchport(*COMMANDS[command](evaluated, project), env={"COLUMNS": str(width)}, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: findings (scan) or a failed check, still output
    lines = done.stdout.splitlines()
    assert len(lines) >= 2, done.stdout
    if command == "fix":
        # The diff's code lines are applied, not read: never folded (the fixer's own inserted line is 113 wide).
        lines = [line for line in lines if line.startswith(("+++", "---", "@@")) or not line.startswith(("+", "-", " "))]
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, f"{len(too_long)} line(s) over {width} columns, e.g.\n" + "\n".join(too_long[:3])


def test_a_narrow_table_says_what_it_left_out():
    narrow = run_torchport("backends", env={"COLUMNS": "80"})
    wide = run_torchport("backends", env={"COLUMNS": "200"})
    assert "left out at 80 columns: kind, verified" in narrow.stdout.replace("\n", " ")
    assert "left out" not in wide.stdout and "verified" in wide.stdout


def test_prose_is_folded_with_a_hanging_indent():
    from torchport.output import fit_lines

    text = "  - " + " ".join(["word"] * 40) + "\nshort\n" + "x" * 100
    lines = fit_lines(text, 40).split("\n")
    assert all(len(line) <= 40 for line in lines)
    assert lines[0].startswith("  - word") and lines[1].startswith("    word")
    assert "short" in lines and "".join(lines[-3:]).replace(" ", "").endswith("x" * 100)
