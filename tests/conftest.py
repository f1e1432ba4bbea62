"""Shared test helpers.  Tests run the real CLI in real subprocesses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "apps"

# Small protocol settings for tests where the figures are not the point.
QUICK_TIMING = ["--repeats", "1", "--steps", "4", "--blocks", "2", "--max-warmup", "4", "--no-inference"]
# ...and without the trace and checks stages, which have tests of their own.
QUICK = QUICK_TIMING + ["--no-trace", "--no-checks"]


def run_torchport(*args: str, timeout: float = 300, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m torchport.cli ARGS`` as a user would, capturing output.
    In a wide terminal: these tests read whole lines, and text folded to a
    narrow one is tests/test_output_widths.py's subject."""
    return subprocess.run(
        [sys.executable, "-m", "torchport.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**os.environ, "COLUMNS": "1000", **(env or {})},
    )


def ranks_match_one_process(check: dict) -> bool:
    """A distributed check whose ranks matched one process: a pass, or a borderline whose only cause is a
    scaling efficiency under the pass threshold (ranks sharing this 2-core host rarely reach it)."""
    figures = check["figures"]
    if figures.get("parameter_error") is None or figures["parameter_error"] > figures["bound"]:
        return False
    if check["status"] == "borderline":
        return figures["scaling_efficiency"] < figures["efficient_from"] and check["reason"].startswith("borderline: ")
    return check["status"] == "pass" and figures["scaling_efficiency"] >= figures["efficient_from"]


# --- running in two processes (pytest-xdist, `make test`) ------------------------------------------
#
# `make test` runs the suite in two pytest-xdist workers, then the tests marked `alone` by
# themselves: those whose verdict comes from timing the app (the input-pipeline verdicts, the
# budget's decisions), which a test running beside them on a 2-core host would change.
# Tests sharing a fixture made once per module or session (a real evaluation, a check) run in
# the same worker, so each is still made once; heavy groups go first so no worker is left with a
# long one at the end.

# An xdist worker's interpreter sets COLUMNS=80 and LINES=24 (GNU readline does when it starts),
# which would narrow the text of in-process commands there and not in a plain run: each worker
# gets the terminal variables of the command that started the tests.
TERMINAL_VARIABLES = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    node.workerinput["terminal_environment"] = {name: os.environ.get(name) for name in TERMINAL_VARIABLES}


def pytest_configure(config: pytest.Config) -> None:
    inherited = getattr(config, "workerinput", {}).get("terminal_environment", {})
    for name, value in inherited.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _shared_fixtures(item: pytest.Item) -> list[str]:
    """The fixtures of this suite, wider than one test, that ``item`` uses."""
    keys = []
    for name in getattr(item, "fixturenames", ()):
        definitions = item._fixtureinfo.name2fixturedefs.get(name) if hasattr(item, "_fixtureinfo") else None
        if not definitions:
            continue
        definition = definitions[-1]
        if definition.scope == "function" or not definition.baseid.startswith("tests"):
            continue  # per test, or pytest's own (tmp_path_factory)
        # ("@" would end the group's name: xdist reads the group after the last one in a test's id)
        keys.append(f"{item.module.__name__}.{name}" if definition.scope == "module" else name)
    return keys


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `--dist loadgroup` reads as option.dist in the controller, as option.loadgroup in each worker.
    if not (getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", None) == "loadgroup"):
        return
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    uses = {item.nodeid: _shared_fixtures(item) for item in items}
    for keys in uses.values():
        for key in keys[1:]:
            parent[root(key)] = root(keys[0])
    weight: dict[str, int] = {}
    for item in items:
        if uses[item.nodeid]:
            group = root(uses[item.nodeid][0])
            item.add_marker(pytest.mark.xdist_group(group))
            weight[group] = weight.get(group, 0) + (10 if item.get_closest_marker("slow") else 1)
    # Heavy first: groups by weight, then single slow tests, then the rest, each in collection order.
    def rank(item: pytest.Item) -> tuple[int, int]:
        keys = uses[item.nodeid]
        if keys:
            return (0, -weight[root(keys[0])])
        return (1, 0) if item.get_closest_marker("slow") else (2, 0)

    items.sort(key=rank)


def load_result(out_dir: Path) -> dict:
    return json.loads((out_dir / "result.json").read_text())


@pytest.fixture
def torchport_cli():
    return run_torchport


@pytest.fixture
def apps_dir() -> Path:
    return APPS


def _environment(name: str) -> dict:
    """A torchport environment the test needs: skipped locally when it is
    missing, a failure in CI (whose `make test` creates it first)."""
    from torchport import envs

    record = envs.status(name)
    if not record["ready"]:
        message = f"{record['problem']}; run: torchport env create {name}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must create the {name} environment before the tests: {message}")
        pytest.skip(message)
    return record


@pytest.fixture
def xla_environment():
    return _environment("xla")


@pytest.fixture(scope="session")
def tpu_environment():
    """torchport's tpu environment (CPU torch 2.13.0 + torch_tpu 0.2.0 + libtpu)."""
    return _environment("tpu")


# --- real result files shared by the compare and HTML report tests (made once per session) ---

COMPARE_APP = APPS / "compare_tiny.py"
COMPARE_PROTOCOL = ["--repeats", "2", "--steps", "8", "--blocks", "4", "--max-warmup", "4", "--no-inference",
                    "--no-trace", "--no-checks"]


def _evaluate(out: Path, *args: str, env: dict | None = None) -> Path:
    completed = run_torchport("evaluate", *args, "-o", str(out), env=env, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return out / "result.json"


@pytest.fixture(scope="session")
def builtin_evaluation(tmp_path_factory) -> Path:
    """The built-in example evaluated as `make demo` does (every stage), smaller:
    cpu and cpu-compile, 2 fresh processes each.  Returns its output folder."""
    out = tmp_path_factory.mktemp("builtin") / "run"
    _evaluate(out, "builtin:classifier", "-b", "cpu,cpu-compile", "--repeats", "2", "--steps", "8", "--blocks", "4",
              "--max-warmup", "8", "--price", "cpu=0.50")
    return out


@pytest.fixture(scope="session")
def budget_too_small_evaluation(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """tests/apps/budget_app.py on cpu and cpu-compile in a 60 s budget, cpu-compile's first step
    40 s long: a budget too small for cpu-compile, cpu measured.  Made once for test_budget and
    test_report_model (each asserts its own things); returns the output folder and the finished
    command, unchecked, so each test's own assertion reports a failed run with its stderr."""
    out = tmp_path_factory.mktemp("budget") / "out"
    completed = run_torchport("evaluate", str(APPS / "budget_app.py"), "-b", "cpu,cpu-compile", "--budget", "60s",
                              "--precision", "50%", "--no-trace", "--no-checks", "--no-inference", "-o", str(out),
                              env={"TORCHPORT_TEST_SLOW_BACKEND": "cpu-compile", "TORCHPORT_PROGRESS_INTERVAL": "5"},
                              timeout=240)
    return out, completed


@pytest.fixture(scope="session")
def branch_flip_evaluation(tmp_path_factory) -> Path:
    """tests/apps/compile_branch_flip.py evaluated on cpu-compile with the trace stage: one run for
    test_compile_counters (Dynamo's counts per phase) and test_trace_compile_check (the trace's
    findings judged by those counts).  Returns its output folder."""
    out = tmp_path_factory.mktemp("branch-flip") / "run"
    completed = run_torchport("evaluate", str(APPS / "compile_branch_flip.py"), "-b", "cpu-compile", "--repeats", "1",
                              "--steps", "4", "--blocks", "2", "--max-warmup", "12", "--no-inference", "--no-checks",
                              "-o", str(out), timeout=600)
    assert completed.returncode == 0, "evaluate compile_branch_flip.py -b cpu-compile:\n" + completed.stderr[-3000:]
    return out


# The xla tests' protocol: small, because compile counts and causes are their point, not timings; without
# the trace and checks stages, which leave the exit status alone and have xla tests of their own
# (tests/test_check_xla.py, tests/test_trace_evaluate.py).
XLA_PROTOCOL = ["--repeats", "1", "--steps", "20", "--blocks", "4", "--max-warmup", "8", "--no-inference",
                "--no-trace", "--no-checks"]


@pytest.fixture(scope="session")
def classifier_on_cpu_and_xla(tmp_path_factory) -> Path:
    """builtin:classifier on cpu and xla (XLA_PROTOCOL): one run for test_backends_xla (counters, losses)
    and test_answer (the answer's proxy row).  Returns its output folder."""
    _environment("xla")
    out = tmp_path_factory.mktemp("xla") / "classifier"
    completed = run_torchport("evaluate", "builtin:classifier", "-b", "cpu,xla", *XLA_PROTOCOL, "-o", str(out),
                              timeout=900)
    assert completed.returncode == 0, "evaluate builtin:classifier -b cpu,xla:\n" + completed.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def machine_results(tmp_path_factory) -> dict[str, Path]:
    """Result files of one small app as if from several machines: two with different
    backends and prices, one with another batch shape (not comparable), one whose
    step sleeps 20 ms (a certain regression)."""
    root = tmp_path_factory.mktemp("machines")
    return {
        "laptop": _evaluate(root / "laptop", str(COMPARE_APP), "-b", "cpu", *COMPARE_PROTOCOL, "--price", "cpu=0.10"),
        "gpubox": _evaluate(root / "gpubox", str(COMPARE_APP), "-b", "cpu-compile", "--reference", "cpu-compile",
                            *COMPARE_PROTOCOL, "--price", "cpu-compile=0.30"),
        "wide": _evaluate(root / "wide", str(COMPARE_APP), "-b", "cpu", *COMPARE_PROTOCOL,
                          env={"COMPARE_TINY_BATCH": "32"}),
        "slow": _evaluate(root / "slow", str(COMPARE_APP), "-b", "cpu", *COMPARE_PROTOCOL,
                          env={"COMPARE_TINY_SLEEP_S": "0.02"}),
    }


# --- "runs on X" only with proof from X: every result document a test produces -------------

def _unproven(root: Path) -> list[str]:
    from torchport.document import result_record
    from torchport.script.evidence import unproven_verdicts

    problems = []
    # os.walk, not rglob: the fault tests leave folders too deep or unreadable to stat, which it skips.
    found = sorted(Path(folder) / "result.json" for folder, _, files in os.walk(root) if "result.json" in files)
    for path in found:
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a test of a damaged result file: nothing to check
        problems += [f"{path}: {problem}" for problem in unproven_verdicts(result_record(document))]
    return problems


@pytest.fixture(autouse=True)
def _runs_only_with_device_evidence(request):
    """After each test that used ``tmp_path``: no script verdict in any result
    document it produced says a backend runs without device evidence."""
    yield
    tmp_path = getattr(request.node, "funcargs", {}).get("tmp_path")
    if tmp_path is not None:
        problems = _unproven(tmp_path)
        assert not problems, "a verdict says 'runs' without device evidence:\n" + "\n".join(problems)


def pytest_sessionfinish(session, exitstatus):
    """The same over every result the session wrote (session-scoped fixtures included)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        base = factory.getbasetemp()
    except Exception:
        return
    problems = _unproven(base)
    if problems:
        session.config.get_terminal_writer().line("a verdict says 'runs' without device evidence:\n" + "\n".join(problems), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
