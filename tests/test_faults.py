"""Fault injection through the real CLI: hostile input, faults on one backend,
signals, a killed parent, concurrent runs, a full disk, malformed results.

Every case runs ``python -m torchport`` in a real subprocess with real
workers, and asserts what the README promises: the exit status, one line
naming the problem (no traceback), no process left behind (found by a marker
in the environment of everything the case started), no temporary files left
(each case has its own TMPDIR), result.json strict JSON and valid against
the schema, and the other backends' results complete.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from torchport import forkserver, processes
from torchport.document import load_schema

TESTS = Path(__file__).resolve().parent
FAULT_APPS = TESTS / "apps" / "faults"
PLUGINS = TESTS / "plugins"
MARKER = "TORCHPORT_FAULT_TEST"
QUICK = ["--steps", "4", "--blocks", "2", "--max-warmup", "4", "--no-inference"]
HOSTILE_BACKEND = "odd[/x]</td><script>`|"
CONTROL_BACKEND = "ctl\x1b[31m\x07\r\nname"
ONE_BACKEND_FAULTS = ["unsupported", "oom", "multiline", "hostile", "segfault", "flood", "nan", "exit", "setsid", "hang"]


class Case:
    """One CLI invocation with its own marker and temporary folder."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None):
        self.marker = uuid.uuid4().hex
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "COLUMNS": "160", "TMPDIR": str(self.tmp), MARKER: self.marker,
                    "TORCHPORT_BACKEND_PATH": str(PLUGINS), **(env or {})}

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "torchport", *args]

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout, env=self.env)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env)

    def leftovers(self, within: float = 3.0) -> list[int]:
        deadline = time.monotonic() + within
        while True:
            alive = [pid for pid in processes.marked(MARKER, self.marker) if not _zombie(pid)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.1)

    def assert_clean(self, within: float = 3.0) -> None:
        left = self.leftovers(within)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"processes left behind: {left}"
        # torch.compile keeps its cache (torchinductor_USER) in TMPDIR by design: not a leftover of torchport.
        left_files = [p.name for p in self.tmp.iterdir() if not p.name.startswith("torchinductor_")]
        assert not left_files, f"temporary files left: {left_files}"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def one_error_line(completed_stderr: str, *fragments: str) -> str:
    lines = [line for line in completed_stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("torchport: error:")]
    assert "Traceback" not in completed_stderr, completed_stderr[-3000:]
    assert len(errors) == 1, completed_stderr[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def strict_document(path: Path) -> dict:
    """The result, parsed by a strict JSON parser and checked against the schema."""
    def reject(name):
        raise AssertionError(f"non-strict JSON constant {name} in {path}")

    document = json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)
    jsonschema.validate(document, load_schema())
    return document


# --- 1. bad options: one line, exit 2, nothing started ------------------------------------------------

BAD_OPTIONS = [
    (["evaluate", "--timeout", "nan"], "--timeout"),
    (["evaluate", "--timeout", "inf"], "--timeout"),
    (["evaluate", "--timeout", "0"], "--timeout"),
    (["evaluate", "--timeout", "-3"], "--timeout"),
    (["evaluate", "--phase-timeout", "nan"], "--phase-timeout"),
    (["evaluate", "--phase-timeout", "0"], "--phase-timeout"),
    (["evaluate", "--phase-timeout", "-inf"], "--phase-timeout"),
    (["evaluate", "--seed", "-1"], "--seed"),
    (["evaluate", "--seed", str(2**32)], "--seed"),
    (["evaluate", "--seed", "1e3"], "--seed"),
    (["evaluate", "--price", "cpu=1e400"], "price"),
    (["evaluate", "--price", "cpu=1e300"], "price"),
    (["evaluate", "--price", "cpu=-1"], "price"),
    (["evaluate", "--price", "cpu=nan"], "price"),
    (["evaluate", "--price", "=1"], "price"),
    (["evaluate", "--repeats", "0"], "--repeats"),
    (["evaluate", "--steps", "-5"], "--steps"),
    (["evaluate", "-b", "no-such-backend"], "unknown backend"),
    (["evaluate", "--reference", "[/x]"], "unknown backend"),
    (["evaluate", "no/such/app.py"], "app file not found"),
    (["evaluate", "builtin:[/x]"], "built-in app"),
    (["check", "--timeout", "nan"], "--timeout"),
    (["check", "--seed", "-7"], "--seed"),
    (["check", "--steps", "1"], "--steps"),
    (["trace", "--timeout", "-5"], "--timeout"),
    (["trace", "--steps", "0"], "--steps"),
    (["report", "--no-such-flag", "x.json"], "unrecognized"),
    (["compare", "x.json", "--fail-on-regression", "inf"], "--fail-on-regression must be a finite percentage"),
    (["compare", "x.json", "--fail-on-regression", "nan"], "--fail-on-regression must be a finite percentage"),
    (["memory", "hf:gpt2?n_layer=-1"], "hf:gpt2?n_layer=-1: n_layer='-1': a count or size, expected a positive integer"),
    (["memory", "hf:llama?num_attention_heads=0"], "a count or size"),
    (["memory", "hf:gpt2?layer_norm_epsilon=nan"], "expected a finite number"),
]


@pytest.mark.parametrize("args,fragment", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_option_is_one_line(args, fragment, tmp_path):
    case = Case(tmp_path)
    completed = case.run(*args, "-o", str(tmp_path / "out")) if args[0] == "evaluate" else case.run(*args)
    assert completed.returncode == 2, completed.stderr
    one_error_line(completed.stderr, fragment)
    assert not (tmp_path / "out" / "result.json").exists()
    case.assert_clean()


def test_price_file_is_a_folder(tmp_path):
    case = Case(tmp_path)
    completed = case.run("evaluate", "--prices", str(tmp_path), "-o", str(tmp_path / "out"))
    assert completed.returncode == 2
    one_error_line(completed.stderr, "price file is a folder")


def test_price_file_not_utf8(tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b"cpu = 1.0\n\xff\xfe = 2\n")
    completed = Case(tmp_path).run("evaluate", "--prices", str(prices), "-o", str(tmp_path / "out"))
    assert completed.returncode == 2
    one_error_line(completed.stderr, "not UTF-8", str(prices))


def test_output_folder_is_a_file(tmp_path):
    target = tmp_path / "taken"
    target.write_text("a file")
    completed = Case(tmp_path).run("evaluate", "-o", str(target))
    assert completed.returncode == 2
    one_error_line(completed.stderr, "a file of that name exists")


def test_output_folder_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    completed = Case(tmp_path).run("evaluate", "-o", str(tmp_path / "file" / "out"))
    assert completed.returncode == 2
    one_error_line(completed.stderr, "cannot create output folder")


def test_output_folder_on_a_virtual_filesystem(tmp_path):
    completed = Case(tmp_path).run("evaluate", "-o", "/proc/torchport-out")
    assert completed.returncode == 2
    one_error_line(completed.stderr, "output folder")


LONG = "a" * 5000
# Every place a path is given, each bad in one way: {tmp} is the case's folder, {result} a valid result.json in it.
BAD_PATHS = [
    (["evaluate", "--script", LONG], "File name too long"),
    (["evaluate", f"{LONG}.py", "-o", "{tmp}/out"], "File name too long"),
    (["check", f"{LONG}.py"], "File name too long"),
    (["scan", LONG], "File name too long"),
    (["trace", LONG], "app module not found"),  # a name without .py is a module spec
    (["evaluate", LONG, "-o", "{tmp}/out"], "a name longer than a file name can be"),
    (["compare", LONG], "File name too long"),
    (["fix", LONG], "File name too long"),
    (["scan", "{tmp}", "-o", f"{{tmp}}/{LONG}.sarif"], "file name too long"),
    (["scan", "{tmp}", "-o", "/proc/x.sarif"], "cannot write in /proc"),
    (["scan", "{tmp}", "-o", "{tmp}"], "is a folder"),
    (["fix", "{tmp}", "-o", "{tmp}"], "is a folder"),
    (["rules", "-o", "{tmp}"], "is a folder"),
    (["trace", "builtin:classifier", "-o", "{tmp}"], "is a folder"),
    (["trace", "builtin:classifier", "--json", "/proc/t.json"], "cannot write in /proc"),
    (["check", "builtin:classifier", "--json", "{tmp}"], "is a folder"),
    (["memory", "hf:gpt2", "--json", "{tmp}/file/x.json"], "is a file, not a folder"),
    (["report", "{result}", "-o", "{tmp}"], "is a folder"),
    (["report", "{result}", "--html", "{tmp}"], "is a folder"),
    (["compare", "{result}", "--json", "{tmp}"], "is a folder"),
    (["compare", "{result}", "--markdown", "{tmp}"], "is a folder"),
    (["compare", "{result}", "--html", "{tmp}"], "is a folder"),
]


@pytest.mark.parametrize("args,fragment", BAD_PATHS, ids=[" ".join(a)[:60] for a, _ in BAD_PATHS])
def test_bad_path_is_one_line_exit_2_before_any_work(args, fragment, valid_result, tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "file").write_text("x")
    result = folder / "result.json"
    result.write_text(json.dumps(valid_result))
    before = sorted(p.name for p in folder.iterdir())
    case = Case(tmp_path)
    completed = case.run(*[a.format(tmp=folder, result=result) for a in args])
    assert completed.returncode == 2, completed.stderr[-2000:]
    line = one_error_line(completed.stderr, fragment)
    assert len(line) < 1200  # a 5,000-character name is capped in the line
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written (report.md included)
    assert "Running" not in completed.stderr and completed.stdout == ""
    case.assert_clean()


EMPTY_VALUES = [
    (["evaluate", ""], "argument app: empty value"),
    (["evaluate", "-b", ""], "-b/--backend: empty value"),
    (["evaluate", "-b", " , "], "no backend named"),
    (["evaluate", "--reference", ""], "--reference: empty value"),
    (["evaluate", "--out-dir", ""], "empty value"),
    (["evaluate", "--redirect-cuda"], "needs --script"),
    (["scan", ""], "argument PATH: empty value"),
    (["fix", ""], "empty value"),
    (["trace", ""], "empty value"),
    (["check", "-b", ""], "empty value"),
    (["compare", ""], "empty value"),
    (["report", ""], "empty value"),
    (["memory", ""], "empty value"),
    (["scan", ".", "-o", ""], "empty value"),
]


@pytest.mark.parametrize("args,fragment", EMPTY_VALUES, ids=[repr(" ".join(a)) for a, _ in EMPTY_VALUES])
def test_empty_value_is_refused_not_defaulted(args, fragment, tmp_path):
    case = Case(tmp_path)
    completed = subprocess.run(case.command(*args), capture_output=True, text=True, timeout=600, env=case.env,
                               cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr[-2000:]
    one_error_line(completed.stderr, fragment)
    assert not (tmp_path / "torchport-results").exists()  # nothing ran with a default in its place
    assert completed.stdout == ""
    case.assert_clean()


@pytest.mark.parametrize("body,where", [('backends = [""]', "tool.torchport.backends"),
                                        ('[tool.torchport.evaluate]\napp = " "', "tool.torchport.evaluate.app")])
def test_empty_value_in_the_config_is_refused_at_its_key(body, where, tmp_path):
    (tmp_path / ".git").mkdir()
    config = tmp_path / "pyproject.toml"
    config.write_text(f"[tool.torchport]\n{body}\n")
    case = Case(tmp_path)
    completed = subprocess.run(case.command("evaluate"), capture_output=True, text=True, timeout=600, env=case.env,
                               cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr[-2000:]
    one_error_line(completed.stderr, f"{config}:{where}: empty value")
    assert not (tmp_path / "torchport-results").exists()
    case.assert_clean()


# --- 2. `report` on anything ------------------------------------------------------------------------

def _malformed(valid: dict) -> dict[str, bytes]:
    def variant(change) -> bytes:
        document = json.loads(json.dumps(valid))
        change(document)
        return json.dumps(document).encode()

    def no_blocks(document):
        run = document["backends"]["cpu"]["runs"][0]
        run["training"]["sustained"]["blocks"] = []

    return {
        "top-level array": b"[1, 2, 3]",
        "top-level string": b'"result"',
        "empty file": b"",
        "truncated": json.dumps(valid).encode()[:200],
        "missing fields": variant(lambda d: d.pop("backends")),
        "other schema version": variant(lambda d: d.update(schema_version="0.9")),
        "deep nesting": b"[" * 100_000 + b"]" * 100_000,
        "400-digit integer": variant(lambda d: d["config"].update(steps=int("9" * 400))),
        "200000-deep nesting in a field": json.dumps(valid).replace(
            '"seed": 0', '"seed": ' + "[" * 200_000 + "]" * 200_000).encode(),
        "1e999 step time": re.sub(r'"seconds": [0-9.e+-]+', '"seconds": 1e999', json.dumps(valid), count=1).encode(),
        "1e300 step time": re.sub(r'"seconds": [0-9.e+-]+', '"seconds": 1e300', json.dumps(valid), count=1).encode(),
        "zero-length samples": variant(no_blocks),
        "NaN literal": json.dumps(valid).replace('"seed": 0', '"seed": NaN').encode(),
        "not UTF-8": b"\xff\xfe{}",
        "wrong types": variant(lambda d: d.update(backends=[])),
    }


@pytest.fixture(scope="module")
def valid_result(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("valid")
    case = Case(folder)
    completed = case.run("evaluate", "builtin:classifier", "-b", "cpu", "--repeats", "1", *QUICK,
                         "--no-trace", "--no-checks", "-o", str(folder / "out"))
    assert completed.returncode == 0, completed.stderr
    return strict_document(folder / "out" / "result.json")


@pytest.mark.parametrize("command", ["report", "compare"])
def test_malformed_results_are_refused_by_every_reader(command, valid_result, tmp_path):
    cases = _malformed(valid_result)
    assert len(cases) >= 10
    for name, content in cases.items():
        if command == "compare" and name == "other schema version":
            continue  # compare keeps it, listed as not comparable (test_compare)
        path = tmp_path / f"{name.replace(' ', '-')}.json"
        path.write_bytes(content)
        case = Case(tmp_path)
        completed = case.run(command, str(path), *(["--markdown", str(tmp_path / "c.md")] if command == "compare" else []))
        assert completed.returncode == 2, (name, completed.stdout, completed.stderr)
        one_error_line(completed.stderr, str(path), *(["out of range"] if "step time" in name else []))
        assert not (tmp_path / "report.md").exists() and not (tmp_path / "c.md").exists(), name
        assert "nan" not in completed.stdout and "inf" not in completed.stdout, name
        case.assert_clean()


def test_report_on_a_folder(tmp_path):
    completed = Case(tmp_path).run("report", str(tmp_path))
    assert completed.returncode == 2
    one_error_line(completed.stderr, "folder")


# --- 3. a different fault on each backend: the reference and the others fully measured ---------------

@pytest.fixture(scope="module")
def one_backend_faults(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    # The app's own file name is hostile too: it is printed and rendered everywhere.
    app_folder = folder / "app [x] |`b`| <td> &"
    app_folder.mkdir()
    shutil.copy(FAULT_APPS / "common.py", app_folder / "common.py")
    app = app_folder / "by_backend [red]x.py"
    shutil.copy(FAULT_APPS / "by_backend.py", app)
    case = Case(folder)
    names = ["cpu", *(f"fault-{fault}" for fault in ONE_BACKEND_FAULTS), HOSTILE_BACKEND, CONTROL_BACKEND]
    started = time.monotonic()
    completed = case.run("evaluate", str(app), "-b", ",".join(names), "--repeats", "2", *QUICK,
                         "--phase-timeout", "30", "--no-trace", "--no-checks", "-o", str(folder / "out"))
    return {"case": case, "completed": completed, "out": folder / "out", "wall_s": time.monotonic() - started}


EXPECTED_KINDS = {"unsupported": "unsupported-op", "oom": "out-of-memory", "multiline": "app-error",
                  "hostile": "app-error", "segfault": "crash", "flood": "crash", "nan": "numerical",
                  "exit": "app-error", "hang": "timeout"}


def test_faults_on_one_backend_each_are_results(one_backend_faults):
    completed = one_backend_faults["completed"]
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr and "Traceback" not in completed.stdout
    document = strict_document(one_backend_faults["out"] / "result.json")
    assert document["status"] == "complete"
    backends = document["backends"]
    for name in ("cpu", "fault-setsid", HOSTILE_BACKEND, CONTROL_BACKEND):  # fully measured: every repeat
        assert backends[name]["status"] == "ok", backends[name].get("error")
        assert [run["status"] for run in backends[name]["runs"]] == ["ok", "ok"]
        assert backends[name]["summary"]["step_time_s"]["median"] > 0
    for fault, kind in EXPECTED_KINDS.items():
        entry = backends[f"fault-{fault}"]
        assert entry["status"] != "ok", fault
        assert entry["error"]["kind"] == kind, (fault, entry["error"])
        assert len(entry["runs"]) == 1  # not retried, and nothing else cancelled
    # The user's line is named for the exceptions raised in the app's code.
    for fault in ("unsupported", "oom", "multiline", "hostile"):
        assert "by_backend [red]x.py:" in backends[f"fault-{fault}"]["error"]["location"]
    multiline = backends["fault-multiline"]["error"]
    assert multiline["message"].endswith("first line of a long error") and multiline["more"] is True
    assert "\x1b" not in backends["fault-hostile"]["error"]["message"]  # escape sequences made visible


def test_output_of_a_flooding_worker_is_capped(one_backend_faults):
    document = strict_document(one_backend_faults["out"] / "result.json")
    run = document["backends"]["fault-flood"]["runs"][0]
    assert 0 < len(run["stderr_tail"]) <= 20 and all(len(line) <= 301 for line in run["stderr_tail"])
    assert (one_backend_faults["out"] / "result.json").stat().st_size < 2_000_000


def test_hostile_text_is_inert_in_terminal_and_markdown(one_backend_faults):
    completed = one_backend_faults["completed"]
    # rich printed the names and messages literally, markup and all.
    assert "[/x]" in completed.stdout and "[bold]b[/bold]" in completed.stdout and "[red]x.py" in completed.stdout
    report = (one_backend_faults["out"] / "report.md").read_text()
    assert "## Does not run here" in report
    # Outside code blocks (whose content markdown shows as it is), no HTML from the data survives.
    prose = "\n".join(part for index, part in enumerate(re.split(r"^`{3,}.*$", report, flags=re.M)) if index % 2 == 0)
    assert "<script>" not in prose and "</td>" not in prose
    assert "&lt;script>" in report
    # No table row is broken by a pipe from the data: every row has the header's cell count.
    for block in report.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            cells = {len(row.replace("\\|", "").split("|")) for row in rows}
            assert len(cells) == 1, rows
    # Code fences from the app cannot close the report's own.
    assert "\n```\n```" not in report
    # A backend named with control characters: shown as \xNN in every output of the run.
    for where, text in (("stdout", completed.stdout), ("stderr", completed.stderr), ("report.md", report),
                        ("report.html", (one_backend_faults["out"] / "report.html").read_text())):
        for raw in ("\x1b", "\x07", "\r", "ctl\x1b", "\nname"):
            assert raw not in text, (where, raw)
    assert "ctl\\x1b[31m\\x07\\x0d\\x0aname" in completed.stdout


def test_no_process_or_temporary_file_left_behind(one_backend_faults):
    one_backend_faults["case"].assert_clean()


def test_failure_on_the_reference_is_the_apps_bug(tmp_path):
    case = Case(tmp_path, env={"FAULT_ALWAYS": "multiline"})
    completed = case.run("evaluate", str(FAULT_APPS / "by_backend.py"), "-b", "fault-oom,cpu", "--repeats", "2",
                         *QUICK, "--no-trace", "--no-checks", "-o", str(tmp_path / "out"))
    assert completed.returncode == 2
    one_error_line(completed.stderr, "first line of a long error", "by_backend.py:")
    document = strict_document(tmp_path / "out" / "result.json")
    assert document["status"] == "failed"
    assert len(document["backends"]["cpu"]["runs"]) == 1  # the reference ran first and decided
    assert document["backends"]["fault-oom"]["status"] == "skipped"
    assert (tmp_path / "out" / "report.md").stat().st_size > 0
    case.assert_clean()


@pytest.mark.slow
def test_compile_failure_on_one_backend_only(tmp_path):
    case = Case(tmp_path)
    completed = case.run("evaluate", str(FAULT_APPS / "compile_error.py"), "-b", "cpu,cpu-compile", "--repeats", "2",
                         *QUICK, "--no-trace", "--no-checks", "-o", str(tmp_path / "out"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = strict_document(tmp_path / "out" / "result.json")
    assert [run["status"] for run in document["backends"]["cpu"]["runs"]] == ["ok", "ok"]
    error = document["backends"]["cpu-compile"]["error"]
    assert error["kind"] == "compile-error", error
    assert "apps/faults/" in error["location"]  # the innermost line of the app that reached the compiler
    assert "torch" in (error.get("library_frame") or "")
    case.assert_clean()


def test_trace_that_crashes_exits_1_not_2(tmp_path):
    case = Case(tmp_path, env={"FAULT_ALWAYS": "segfault"})
    completed = case.run("trace", str(FAULT_APPS / "by_backend.py"), "--steps", "1")
    assert completed.returncode == 1, completed.stderr
    assert "Traceback" not in completed.stderr
    case.assert_clean()


def test_check_with_a_failing_backend_runs_the_others(tmp_path):
    case = Case(tmp_path)
    completed = case.run("check", str(FAULT_APPS / "by_backend.py"), "-b", "cpu,fault-unsupported",
                         "--only", "parity,checkpoint", "--steps", "4", "--json", str(tmp_path / "checks.json"))
    assert completed.returncode == 1, completed.stderr
    assert "Traceback" not in completed.stderr
    section = json.loads((tmp_path / "checks.json").read_text())
    statuses = {(c["name"], c.get("backend") or c.get("pair")): c["status"] for c in section["checks"]}
    assert statuses[("determinism", "cpu")] == "pass"
    assert statuses[("checkpoint", "cpu -> cpu")] == "pass"
    assert statuses[("parity", "fault-unsupported")] == "error"
    assert section["app_error"] is None
    case.assert_clean()


def test_a_scripts_argument_parser_error_is_shown_as_such(tmp_path):
    case = Case(tmp_path)
    out = tmp_path / "out"
    completed = case.run("evaluate", "--script", str(TESTS / "scripts" / "agnostic.py"), "-b", "cpu", "--repeats", "1",
                         *QUICK, "--no-trace", "--no-checks", "-o", str(out), "--", "--epochs", "many")
    assert completed.returncode == 2, completed.stderr[-3000:]
    one_error_line(completed.stderr, "agnostic.py: the script's argument parser refused its arguments: agnostic.py: "
                   "error: argument --epochs: invalid int value: 'many'")
    assert "no optimizer step" not in completed.stderr
    assert strict_document(out / "result.json")["status"] == "failed"
    case.assert_clean()


# --- 4. signals, a killed parent, concurrent runs -------------------------------------------------------

def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _worker_running(case: Case) -> bool:
    """A worker runs: spawned (its command line), or forked from the fork
    server (its process name; its command line is the server's)."""
    for pid in processes.marked(MARKER, case.marker):
        try:
            if (b"torchport.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
                    or Path(f"/proc/{pid}/comm").read_bytes().strip() == forkserver.PROCESS_NAME):
                return True
        except OSError:
            pass
    return False


def _runs_done(out: Path, count: int) -> bool:
    try:
        document = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return False
    return sum(len(b["runs"]) for b in document["backends"].values()) >= count


SIGNAL_CASES = [
    ("SIGTERM", "timing", 143), ("SIGHUP", "timing", 129), ("SIGINT", "timing", 130),
    ("SIGINT-twice", "timing", 130), ("SIGTERM", "stages", 143), ("SIGINT-twice", "stages", 130),
]


@pytest.mark.parametrize("how,when,status", SIGNAL_CASES, ids=[f"{h}-during-{w}" for h, w, _ in SIGNAL_CASES])
def test_signal_ends_everything_and_keeps_the_result(how, when, status, tmp_path):
    case = Case(tmp_path)
    out = tmp_path / "out"
    args = ["evaluate", str(FAULT_APPS / "by_backend.py"), "-b", "cpu,fault-hang", "--repeats", "1", *QUICK,
            "-o", str(out)]
    if when == "timing":
        args += ["--no-trace", "--no-checks"]
    else:
        args = ["evaluate", "builtin:classifier", "-b", "cpu", "--repeats", "1", *QUICK, "-o", str(out)]
    process = case.start(*args)
    if when == "timing":
        _wait_for(lambda: _runs_done(out, 1) and _worker_running(case), 240, "the hanging worker")
    else:
        _wait_for(lambda: _runs_done(out, 1), 240, "the timing round")
        _wait_for(lambda: _worker_running(case), 120, "a stage worker")
    number = getattr(signal, how.split("-")[0])
    sent = time.monotonic()
    process.send_signal(number)
    if how.endswith("twice"):
        time.sleep(0.3)
        process.send_signal(number)
    stdout, stderr = process.communicate(timeout=60)
    took = time.monotonic() - sent
    assert process.returncode == status, stderr
    assert "Traceback" not in stderr, stderr
    assert took < 15, f"took {took:.1f} s to end"  # promised: 2 s on an idle machine
    document = strict_document(out / "result.json")
    assert document["status"] == "interrupted"
    assert document["backends"]["cpu"]["runs"][0]["status"] == "ok"  # measured before the signal: kept
    assert (out / "report.md").stat().st_size > 0
    assert not (out / ".torchport.lock").exists()
    case.assert_clean()


def test_parent_killed_with_sigkill_takes_its_workers_down(tmp_path):
    case = Case(tmp_path)
    out = tmp_path / "out"
    process = case.start("evaluate", str(FAULT_APPS / "by_backend.py"), "-b", "fault-hang,fault-setsid",
                         "--reference", "fault-hang", "--repeats", "1", *QUICK, "--no-trace", "--no-checks",
                         "-o", str(out))
    _wait_for(lambda: _worker_running(case), 240, "a worker")
    time.sleep(1.0)
    process.kill()
    process.wait()
    killed = time.monotonic()
    left = case.leftovers(within=3.0)
    assert not left, f"workers outlived their parent by {time.monotonic() - killed:.1f} s: {left}"


def test_two_evaluations_into_one_folder(tmp_path):
    first, second = Case(tmp_path / "a"), Case(tmp_path / "b")
    out = tmp_path / "shared"
    args = ["evaluate", "builtin:classifier", "-b", "cpu", "--repeats", "1", *QUICK, "--no-trace", "--no-checks",
            "-o", str(out)]
    running = first.start(*args)
    _wait_for(lambda: (out / ".torchport.lock").exists(), 60, "the first run's lock")
    refused = second.run(*args)
    assert refused.returncode == 2
    one_error_line(refused.stderr, "in use by another torchport run", str(out))
    stdout, stderr = running.communicate(timeout=600)
    assert running.returncode == 0, stderr
    assert strict_document(out / "result.json")["status"] == "complete"
    first.assert_clean()


# --- 5. a full disk, a read-only folder -----------------------------------------------------------------

def _mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs (run the suite as root, as CI does)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def test_disk_full_mid_run(tmp_path):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "size=256k")
    try:
        case = Case(tmp_path)
        out = disk / "out"
        # Leave room for the first result.json writes only.
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (256 * 1024 - 40 * 1024))
        completed = case.run("evaluate", "builtin:classifier", "-b", "cpu,cpu-compile", "--repeats", "3", *QUICK,
                             "--no-trace", "--no-checks", "-o", str(out))
        assert completed.returncode == 1, completed.stderr
        one_error_line(completed.stderr, "No space left on device")
        document = strict_document(out / "result.json")  # the last complete version
        assert document["backends"]["cpu"]["runs"]
        assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
        report = out / "report.md"
        assert not report.exists() or report.stat().st_size > 0
        case.assert_clean()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_read_only_output_folder(tmp_path):
    disk = tmp_path / "ro"
    _mount_tmpfs(disk, "ro,size=64k")
    try:
        completed = Case(tmp_path).run("evaluate", "-o", str(disk / "out"))
        assert completed.returncode == 2
        one_error_line(completed.stderr, "Read-only file system")
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_closed_stderr_ends_only_the_progress_display(tmp_path):
    case = Case(tmp_path)
    out = tmp_path / "out"
    process = case.start("evaluate", "builtin:classifier", "-b", "cpu,cpu-compile", "--repeats", "1", *QUICK,
                         "--no-trace", "--no-checks", "-o", str(out))
    process.stderr.readline()  # the reader takes the first line and goes away, as `2>&1 | head -1` does
    process.stderr.close()
    stdout, _ = process.communicate(timeout=600)
    assert process.returncode == 0
    document = strict_document(out / "result.json")
    assert document["status"] == "complete"
    for name in ("cpu", "cpu-compile"):
        assert [run["status"] for run in document["backends"][name]["runs"]] == ["ok"], name
    assert "cpu-compile" in stdout  # the summary still printed
    assert (out / "report.md").stat().st_size > 0
    case.assert_clean()


def test_stdout_and_stderr_closed_from_the_start(tmp_path):
    case = Case(tmp_path)
    out = tmp_path / "out"
    command = " ".join(f"'{part}'" for part in case.command(
        "evaluate", "builtin:classifier", "-b", "cpu", "--repeats", "1", *QUICK, "--no-trace", "--no-checks",
        "-o", str(out)))
    completed = subprocess.run(["bash", "-c", f"exec {command} >&- 2>&-"], env=case.env, timeout=600)
    assert completed.returncode == 141  # the printed output was lost, and says so; the work was not
    assert strict_document(out / "result.json")["status"] == "complete"
    case.assert_clean()


def test_broken_pipe_ends_quietly(tmp_path):
    case = Case(tmp_path)
    # The reader is gone before the first write: every write fails with EPIPE.
    process = subprocess.Popen(case.command("backends", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=case.env)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert process.returncode == 141


# --- 6. every command's --help renders ------------------------------------------------------------------

def _command_paths() -> list[list[str]]:
    import argparse

    from torchport.cli import build_parser

    paths: list[list[str]] = [[]]

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name in action.choices:
                    paths.append([*prefix, name])
                    walk(action.choices[name], [*prefix, name])

    walk(build_parser(), [])
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "torchport")
def test_help_of_every_command_renders(path, tmp_path):
    completed = Case(tmp_path).run(*path, "--help")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("usage: torchport"), completed.stdout[:500]
    assert completed.stderr == ""


# --- 7. control characters from apps, files, hosts, backends and labels are shown, never obeyed ---------

HOSTILE_TEXT = "TPA\x1b[31m\x07\r\nTPB\x9b2J"
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x9b", "TPA\n", "\nTPB")


def _assert_inert(text: str, where: str) -> None:
    for raw in RAW_CONTROLS:
        assert raw not in text, (where, raw, text[max(0, text.find(raw) - 200):text.find(raw) + 200])


def _hostile_result(valid: dict) -> dict:
    document = json.loads(json.dumps(valid))
    name = f"cpu{HOSTILE_TEXT}"
    document["backends"] = {name: document["backends"]["cpu"]}
    document["reference"] = name
    document["app"]["spec"] = f"app{HOSTILE_TEXT}.py"
    document["environment"]["hostname"] = f"host{HOSTILE_TEXT}"
    return document


def test_control_characters_are_inert_in_every_renderer(valid_result, tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    result = folder / "result.json"
    result.write_text(json.dumps(_hostile_result(valid_result)))
    case = Case(tmp_path)
    report = case.run("report", str(result), "--html")
    assert report.returncode == 0, report.stderr[-2000:]
    comparison = case.run("compare", str(result), "--label", f"{result}=label{HOSTILE_TEXT}",
                          "--markdown", str(folder / "c.md"), "--html", str(folder / "c.html"))
    assert comparison.returncode == 0, comparison.stderr[-2000:]
    terminal = case.run("compare", str(result), "--label", f"{result}=label{HOSTILE_TEXT}")
    outputs = {"report stdout": report.stdout, "report stderr": report.stderr,
               "compare stdout": terminal.stdout, "compare stderr": comparison.stderr + terminal.stderr,
               **{name: (folder / name).read_text() for name in ("report.md", "report.html", "c.md", "c.html")}}
    for where, text in outputs.items():
        _assert_inert(text, where)
    # Shown, not dropped: the app, backend, host and label names are there with \xNN in place.
    assert "TPA\\x1b[31m\\x07\\x0d\\x0aTPB\\x9b2J" in outputs["report.html"] + outputs["c.html"]
    for marker in ("appTPA\\x1b", "cpuTPA\\x1b", "hostTPA\\x1b"):
        assert marker in outputs["report.html"], marker
    assert "labelTPA\\x1b" in outputs["c.html"] and "labelTPA\\x1b" in outputs["compare stdout"]
    assert "appTPA\\x1b" in outputs["report.md"] and "labelTPA\\x1b" in outputs["c.md"]
    case.assert_clean()


def test_control_characters_in_file_names_and_paths(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "a\nb.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    (project / "c\x1b[2Jd.py").write_text("import torch\ny = torch.ones(2).to('cuda')\n")
    case = Case(tmp_path)
    scanned = case.run("scan", str(project), "--fail-on", "never")
    assert scanned.returncode == 0, scanned.stderr
    _assert_inert(scanned.stdout, "scan")
    assert not any(line.startswith("b.py:") for line in scanned.stdout.splitlines())  # no forged finding line
    assert "a\\x0ab.py:2:" in scanned.stdout and "c\\x1b[2Jd.py:2:" in scanned.stdout
    missing = f"{tmp_path}/no{HOSTILE_TEXT}.json"
    for args in (("report", missing), ("--debug", "report", missing), ("compare", missing)):
        completed = case.run(*args)
        assert completed.returncode == 2
        _assert_inert(completed.stderr, " ".join(args))
        assert "no" + "TPA\\x1b" in completed.stderr
    case.assert_clean()


# --- 8. the smaller ones -----------------------------------------------------------------------------

def test_fix_write_on_an_immutable_file_names_the_file(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    source = project / "train.py"
    text = "import torch\nx = torch.zeros(2).cuda()\n"
    source.write_text(text)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(source)]).returncode != 0:
        pytest.skip("needs chattr +i (root, a filesystem with attributes)")
    try:
        case = Case(tmp_path)
        completed = case.run("fix", str(project), "--write", "--force")
        assert completed.returncode == 1, completed.stderr
        line = one_error_line(completed.stderr, f"{source}: cannot write")
        assert ".torchport" not in line  # not the temporary file's name
        assert source.read_text() == text
        assert [p.name for p in project.iterdir()] == ["train.py"]
        case.assert_clean()
    finally:
        subprocess.run(["chattr", "-i", str(source)], check=False)


def test_endless_wait_before_the_first_step_says_no_step_was_seen(tmp_path):
    case = Case(tmp_path)
    out = tmp_path / "out"
    completed = case.run("evaluate", "--script", str(FAULT_APPS / "endless_setup.py"), "-b", "cpu", "--repeats", "1",
                         *QUICK, "--phase-timeout", "15", "--no-trace", "--no-checks", "-o", str(out))
    assert completed.returncode == 1, completed.stderr[-3000:]  # the reference produced no result: not bad input
    assert "Traceback" not in completed.stderr
    said = [line for line in completed.stderr.splitlines() if line.startswith("cpu: does not run here: timeout:")]
    assert len(said) == 1 and "phase 'init' ran over 15 s" in said[0] and "no optimizer step was seen" in said[0]
    document = strict_document(out / "result.json")
    assert document["backends"]["cpu"]["runs"][0]["error"]["kind"] == "timeout"
    case.assert_clean()
