"""Scan and fix limits: memory on a huge one-line file, unreadable folders,
.gitignore, and `fix --write` safety (symbolic links, atomic writes)."""
from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchport.cli import main
from torchport.scan.config import ScanConfig
from torchport.scan.scanner import scan

CUDA_LINE = "import torch\nx = torch.zeros(2).cuda()\n"


def _git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def test_a_4_mib_single_line_file_is_skipped_with_bounded_memory(tmp_path):
    """In a fresh interpreter (so the measurement is the scan's alone): peak traced
    memory stays under 20x the file, and the file is skipped with its reason."""
    size = 4 * 1024 * 1024 - 1024
    big = tmp_path / "minified.py"
    prefix = b"x = torch.zeros(2).cuda(); s = '"
    big.write_bytes(prefix + b"a" * (size - len(prefix) - 2) + b"'\n")
    (tmp_path / "ok.py").write_text(CUDA_LINE)
    probe = textwrap.dedent(f"""
        import json, tracemalloc
        from pathlib import Path
        from torchport.scan.config import ScanConfig
        from torchport.scan.scanner import scan
        tracemalloc.start()
        result = scan([Path({str(tmp_path)!r})], ScanConfig(), jobs=1)
        current, peak = tracemalloc.get_traced_memory()
        print(json.dumps({{"peak": peak, "skipped": [[s.path, s.reason] for s in result.skipped],
                          "rules": [f.rule_id for f in result.findings]}}))
        """)
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["rules"] == ["TP002"]  # the other file is still scanned
    (path, reason), = report["skipped"]
    assert path.endswith("minified.py") and "a line of" in reason and "minified or generated" in reason
    assert report["peak"] < 20 * size, report["peak"]


def test_a_long_line_under_the_limit_gets_a_bounded_excerpt(tmp_path, capsys):
    line = "y = [" + ", ".join(["1"] * 5000) + "]; x = torch.zeros(2).cuda()\n"
    (tmp_path / "wide.py").write_text("import torch\n" + line)
    assert main(["scan", str(tmp_path), "--format", "json", "--fail-on", "never"]) == 0
    finding, = json.loads(capsys.readouterr().out)["findings"]
    assert finding["column"] > 15000 and len(finding["snippet"]) <= 200
    assert "cuda()" in finding["snippet"]
    assert main(["scan", str(tmp_path), "--fail-on", "never"]) == 0
    text = capsys.readouterr().out
    assert max(len(row) for row in text.splitlines()) < 400


def _deep_folder(root: Path) -> Path:
    """A folder whose absolute path is longer than PATH_MAX: no process can open it
    by name, whoever it runs as (root included)."""
    descriptor = os.open(root, os.O_RDONLY)
    depth = 0
    try:
        while len(str(root)) + depth * 201 < 4200:
            os.mkdir("d" * 200, dir_fd=descriptor)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
            depth += 1
        with open(os.open("x.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=descriptor), "w") as out:
            out.write(CUDA_LINE)
    finally:
        os.close(descriptor)
    return root / "/".join(["d" * 200] * depth)


def test_an_unreadable_sub_folder_is_skipped_with_its_reason(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(CUDA_LINE)
    (tmp_path / "deep").mkdir()
    _deep_folder(tmp_path / "deep")
    status = main(["scan", str(tmp_path), "--fail-on", "never"])
    captured = capsys.readouterr()
    assert status == 0 and "Traceback" not in captured.out + captured.err
    skipped = [row for row in captured.out.splitlines() if ": skipped: " in row]
    assert len(skipped) == 1 and os.strerror(errno.ENAMETOOLONG) in skipped[0]
    assert "ok.py:2:" in captured.out


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder whatever its mode")
def test_a_folder_without_read_permission_is_skipped(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(CUDA_LINE)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "x.py").write_text(CUDA_LINE)
    locked.chmod(0)
    try:
        assert main(["scan", str(tmp_path), "--fail-on", "never"]) == 0
        assert "locked: skipped: permission denied" in capsys.readouterr().out
    finally:
        locked.chmod(0o755)


# -- .gitignore -----------------------------------------------------------------------------

def _rules_by_file(result) -> set[str]:
    return {Path(f.path).name for f in result.findings}


def test_gitignore_is_respected_in_a_repository(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n")
    for name in ("train.py", "generated/model.py", "api_pb2.py", "sub/keep.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(CUDA_LINE)
    assert _rules_by_file(scan([tmp_path], ScanConfig())) == {"train.py", "keep.py"}
    everything = ScanConfig(use_gitignore=False)
    assert _rules_by_file(scan([tmp_path], everything)) == {"train.py", "model.py", "api_pb2.py", "keep.py"}
    # A file named on the command line is scanned even when ignored.
    assert _rules_by_file(scan([tmp_path / "api_pb2.py"], ScanConfig())) == {"api_pb2.py"}


def test_gitignore_without_git_uses_the_matcher(tmp_path, capsys):
    (tmp_path / ".gitignore").write_text("# build output\nout/\n*.gen.py\n!keep.gen.py\n/top_only.py\n")
    for name in ("train.py", "out/a.py", "x.gen.py", "keep.gen.py", "top_only.py", "sub/top_only.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(CUDA_LINE)
    (tmp_path / "sub" / ".gitignore").write_text("local.py\n")
    (tmp_path / "sub" / "local.py").write_text(CUDA_LINE)
    found = {f.path for f in scan([tmp_path], ScanConfig()).findings}
    assert {Path(p).relative_to(tmp_path).as_posix() for p in found} == {
        "train.py", "keep.gen.py", "sub/top_only.py"}
    assert main(["scan", str(tmp_path), "--no-ignore", "--format", "json", "--fail-on", "never"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["findings"] == 7


# -- fix --write safety ---------------------------------------------------------------------

def test_fix_write_never_follows_a_symlink_out_of_the_repository(tmp_path, capsys):
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    _git(repo, "init", "-q")
    target = outside / "shared.py"
    target.write_text(CUDA_LINE)
    (repo / "link.py").symlink_to(target)
    (repo / "own.py").write_text(CUDA_LINE)
    (repo / "alias.py").symlink_to(repo / "own.py")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "x")
    status = main(["fix", str(repo), "--write", "--min-torch", "2.6"])
    err = capsys.readouterr().err
    assert status == 1
    assert "link.py: skipped: not written: a symbolic link to" in err and "outside the project" in err
    assert target.read_text() == CUDA_LINE  # untouched
    assert ".to(ACCELERATOR_DEVICE)" in (repo / "own.py").read_text()
    assert (repo / "alias.py").is_symlink()  # written through to its target, link kept


def test_fix_write_is_atomic_and_keeps_the_mode(tmp_path, capsys):
    script = tmp_path / "run.py"
    script.write_text("#!/usr/bin/env python\n" + CUDA_LINE)
    script.chmod(0o751)
    inode = script.stat().st_ino
    assert main(["fix", str(script), "--write", "--force", "--min-torch", "2.6"]) == 0
    capsys.readouterr()
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert script.stat().st_ino != inode  # a new file renamed into place
    assert ".to(ACCELERATOR_DEVICE)" in script.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["run.py"]  # no temporary left behind


def test_raising_torch_cuda_out_of_memory_error_is_portable_and_scans(tmp_path, capsys):
    """torch.cuda.OutOfMemoryError is torch.OutOfMemoryError on every build; calling
    it (sglang's tests do) crashed the scan once with an AssertionError."""
    (tmp_path / "oom.py").write_text('import torch\n\n\ndef f():\n    raise torch.cuda.OutOfMemoryError("conversion")\n')
    status = main(["scan", str(tmp_path), "--format", "json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    report = json.loads(captured.out)
    assert report["findings"] == [] and report["skipped"] == []


def _analysis_failing_on_broken_py(monkeypatch):
    """torchport's analysis raising for files named broken.py: a planted bug in one detector."""
    from torchport.scan import python

    analyze = python.analyze_with_cuda_tests  # what the scanner calls

    def fails_on_one_file(tree, text, display):
        if display.endswith("broken.py"):
            raise AssertionError("a detector's broken assumption")
        return analyze(tree, text, display)

    monkeypatch.setattr(python, "analyze_with_cuda_tests", fails_on_one_file)


def test_a_file_torchports_analysis_fails_on_is_skipped_and_the_rest_is_kept(tmp_path, capsys, monkeypatch):
    """A bug in one detector costs that file, named with the failure, not the scan; the
    scan is incomplete, so a gate fails as on a finding, and --debug shows the traceback."""
    _analysis_failing_on_broken_py(monkeypatch)
    (tmp_path / "ok.py").write_text("import torch\n")
    (tmp_path / "broken.py").write_text(CUDA_LINE)
    status = main(["scan", str(tmp_path), "--format", "json", "--fail-on", "never"])
    captured = capsys.readouterr()
    assert status == 0 and "Traceback" not in captured.out + captured.err
    assert "analysis failed on 1 file(s)" in captured.err
    report = json.loads(captured.out)
    (skipped,) = report["skipped"]
    assert skipped["path"].endswith("broken.py")
    assert skipped["reason"].startswith("torchport could not analyse it (AssertionError at scanner.py:")
    assert "a detector's broken assumption" in skipped["reason"] and "a bug in torchport" in skipped["reason"]
    (tmp_path / "ok.py").write_text(CUDA_LINE)
    report = json.loads(_scan_json(capsys, tmp_path, "--fail-on", "never"))
    assert [Path(finding["path"]).name for finding in report["findings"]] == ["ok.py"]
    # ok.py alone has nothing at error; the unanalysed file fails the default gate all the same
    (tmp_path / "ok.py").write_text("import torch\n")
    assert main(["scan", str(tmp_path)]) == 1
    capsys.readouterr()
    assert main(["scan", str(tmp_path), "--debug"]) == 1
    assert "AssertionError: a detector's broken assumption" in capsys.readouterr().err


def _scan_json(capsys, folder, *args):
    assert main(["scan", str(folder), "--format", "json", *args]) == 0
    return capsys.readouterr().out


def test_fix_leaves_a_file_its_analysis_fails_on_as_it_is_and_exits_1(tmp_path, capsys, monkeypatch):
    _analysis_failing_on_broken_py(monkeypatch)
    (tmp_path / "ok.py").write_text(CUDA_LINE)
    (tmp_path / "broken.py").write_text(CUDA_LINE)
    status = main(["fix", str(tmp_path), "--write", "--force"])
    captured = capsys.readouterr()
    assert status == 1 and "Traceback" not in captured.err
    assert "broken.py: skipped: torchport could not analyse it (AssertionError" in captured.err
    assert (tmp_path / "broken.py").read_text() == CUDA_LINE and (tmp_path / "ok.py").read_text() != CUDA_LINE


def test_a_pass_over_every_file_that_fails_keeps_the_findings_and_fails_the_gate(tmp_path, capsys, monkeypatch):
    """A bug in a cross-file pass (here the one that lowers functions no file calls) leaves each
    file's findings as the per-file analysis made them, is named as an unfinished pass in every
    format, and fails a gate; --debug raises it."""
    from torchport.scan import reachability

    def planted_bug(*args, **kwargs):
        raise KeyError("a pass's broken assumption")

    monkeypatch.setattr(reachability, "lower_unreached", planted_bug)
    (tmp_path / "train.py").write_text(CUDA_LINE)
    status = main(["scan", str(tmp_path), "--format", "json", "--fail-on", "never"])
    captured = capsys.readouterr()
    assert status == 0 and "Traceback" not in captured.out + captured.err
    assert "the pass over every file that looks at functions no file calls did not finish" in captured.err
    report = json.loads(captured.out)
    assert [Path(f["path"]).name for f in report["findings"]] == ["train.py"]
    assert report["skipped"] == [] and report["summary"]["files_skipped"] == 0
    (unfinished,) = report["unfinished_passes"]
    assert unfinished["name"] == "functions no file calls"
    assert unfinished["reason"].startswith("torchport failed in it (KeyError at scanner.py:")
    assert "a pass's broken assumption" in unfinished["reason"]
    sarif = json.loads(_scan_json(capsys, tmp_path, "--format", "sarif", "--fail-on", "never"))
    (invocation,) = sarif["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error" and "locations" not in notification
    # nothing at error left; the unfinished pass fails the default gate all the same
    (tmp_path / "train.py").write_text("import torch\n")
    assert main(["scan", str(tmp_path)]) == 1
    assert "unfinished pass over every file (functions no file calls)" in capsys.readouterr().out
    assert main(["scan", str(tmp_path), "--debug"]) == 1
    assert "KeyError: \"a pass's broken assumption\"" in capsys.readouterr().err


def test_a_pass_that_runs_out_of_stack_is_not_called_a_bug(tmp_path, capsys, monkeypatch):
    from torchport.scan import reachability

    def too_deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(reachability, "lower_unreached", too_deep)
    (tmp_path / "train.py").write_text("import torch\n")
    assert main(["scan", str(tmp_path), "--debug"]) == 1
    err = capsys.readouterr().err
    assert "did not finish" in err and "(cannot finish: nesting too deep)" in err and "a bug" not in err


def test_a_bug_in_reading_a_files_imports_for_the_cross_file_passes_costs_that_file(tmp_path, capsys, monkeypatch):
    """The hints every Python file gives the passes across files (imports under a CUDA check) are
    read inside the same guard as the detectors: a bug there skips the file, not the scan."""
    from torchport.scan import cross_file_guards

    hints = cross_file_guards.hints

    def fails_on_one_file(text):
        if "broken" in text:
            raise AssertionError("a broken reading of imports")
        return hints(text)

    monkeypatch.setattr(cross_file_guards, "hints", fails_on_one_file)
    (tmp_path / "ok.py").write_text(CUDA_LINE)
    (tmp_path / "broken.py").write_text("# broken\n" + CUDA_LINE)
    report = json.loads(_scan_json(capsys, tmp_path, "--fail-on", "never"))
    (skipped,) = report["skipped"]
    assert skipped["path"].endswith("broken.py") and "a broken reading of imports" in skipped["reason"]
    assert [Path(finding["path"]).name for finding in report["findings"]] == ["ok.py"]
