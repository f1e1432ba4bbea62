"""DDP under compile: on a *-compile backend each rank compiles its
DDP-wrapped model (torch.compile(DistributedDataParallel(model))), so the
ranks are compared with the compiled single process like with like.  A
compile-only bug that depends on the batch each process sees fails the
distributed check on cpu-compile, with the ranks' compiled frames as
evidence, and passes on eager cpu.  Every torchrun launch is bounded by
--timeout (and the command by the test's own timeout)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import APPS, ranks_match_one_process, run_torchport


@pytest.fixture(scope="module")
def compile_bug_ranks(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The distributed check of the app whose bug shows only when compiled, on cpu and cpu-compile:
    one run for the compiled ranks' failure and the eager ranks' clean record."""
    out = tmp_path_factory.mktemp("ddp-compile") / "check.json"
    done = run_torchport("check", str(APPS / "check_compile_bug_ranks.py"), "-b", "cpu,cpu-compile",
                         "--only", "distributed", "--distributed-steps", "4", "--timeout", "200",
                         "--format", "json", "-o", str(out), timeout=560)
    return done, out


def test_compiled_ranks_fail_a_compile_only_bug_that_eager_ranks_pass(compile_bug_ranks):
    done, out = compile_bug_ranks
    assert done.returncode == 1, done.stderr[-3000:]  # a check failed
    checks = {c["backend"]: c for c in json.loads(out.read_text())["checks"]}
    eager, compiled = checks["cpu"], checks["cpu-compile"]
    assert ranks_match_one_process(eager), eager["reason"]
    assert eager["figures"]["frames_compiled"] == {"ranks": {"0": None, "1": None}, "single_process": None}
    assert compiled["status"] == "fail", compiled["reason"]
    assert compiled["figures"]["parameter_error"] > compiled["figures"]["bound"]
    # The right reason: the ranks really ran compiled code.
    frames = compiled["figures"]["frames_compiled"]
    assert all(count and count > 0 for count in frames["ranks"].values()) and frames["single_process"] > 0
    assert "compiled ranks: each ran torch.compile(DistributedDataParallel(model), backend='inductor')" in compiled["reason"]


def test_rank_dependent_branch_is_named_as_the_cause_of_a_distributed_divergence(tmp_path):
    out = tmp_path / "check.json"
    done = run_torchport("check", str(APPS / "check_rank_branch.py"), "-b", "cpu", "--only", "distributed",
                         "--distributed-steps", "3", "--timeout", "200", "--format", "json", "-o", str(out),
                         timeout=400)
    assert done.returncode == 1, done.stderr[-3000:]
    (check,) = json.loads(out.read_text())["checks"]
    assert check["status"] == "fail", check["reason"]
    parted = check["figures"]["rank_op_sequences"]
    # rank 0 runs the sigmoid (and its backward) that rank 1 does not
    assert parted.startswith("rank 0: ") and "sigmoid on rank 0" in parted, parted
    assert "the ranks ran different ops in their forward and backward" in check["reason"]
    assert "control flow that depends on the rank" in check["reason"]


def test_ranks_running_the_same_ops_record_no_difference(compile_bug_ranks):
    # The eager ranks of the run above.  That a distributed check that passes exits 0 is
    # tests/test_check.py::test_ddp_over_gloo_with_two_processes_matches_one_process.
    done, out = compile_bug_ranks
    assert out.is_file(), done.stderr[-3000:]
    check = next(c for c in json.loads(out.read_text())["checks"] if c["backend"] == "cpu")
    assert ranks_match_one_process(check) and check["figures"]["rank_op_sequences"] is None, check
