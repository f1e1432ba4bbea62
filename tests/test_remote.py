"""evaluate --on: real OpenSSH to a real sshd on a loopback port, real remote workers.

The sshd is started here on 127.0.0.1 with a throwaway host key and user key
in a temporary folder; the remote side uses its own folder
(TORCHPORT_REMOTE_HOME, set by the server's SetEnv), so the remote venv,
run folders and processes can be inspected.  The tests skip, saying why,
where sshd is not installed (`make test` installs Debian's openssh-server
where it can).
"""
from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import QUICK, run_torchport
from torchport.errors import UserError
from torchport.remote import ship
from torchport.remote.runner import forwarded_arguments
from torchport.remote.targets import clean_line, parse_target, ssh_command

TESTS = Path(__file__).resolve().parent
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
SETUP_WAIT_S = 60  # for sshd to listen, and for a run to appear: generous, never an assertion on time


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


class Server:
    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        self.remote_home = root / "remote-home"
        self.remote_home.mkdir()
        host_pub = _keygen(root / "host_key")
        wrong_pub = _keygen(root / "wrong_host_key")
        user_pub = _keygen(root / "user_key")
        (root / "authorized_keys").write_text(user_pub + "\n")
        key_type, key = host_pub.split()[:2]
        (root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {key_type} {key}\n")
        wrong_type, wrong = wrong_pub.split()[:2]
        (root / "known_hosts_wrong").write_text(f"[127.0.0.1]:{self.port} {wrong_type} {wrong}\n")
        (root / "sshd_config").write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}",
            f"AuthorizedKeysFile {root / 'authorized_keys'}", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", "PermitRootLogin prohibit-password",
            f"PidFile {root / 'sshd.pid'}", f"SetEnv TORCHPORT_REMOTE_HOME={self.remote_home}", "LogLevel ERROR", ""]))
        user = getpass.getuser()
        common = ["  HostName 127.0.0.1", f"  User {user}", f"  IdentityFile {root / 'user_key'}", "  IdentitiesOnly yes",
                  "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes"]
        self.config = root / "ssh_config"
        self.config.write_text("\n".join([
            "Host tp-good", f"  Port {self.port}", *common, f"  UserKnownHostsFile {root / 'known_hosts'}",
            "Host tp-wrongkey", f"  Port {self.port}", *common, f"  UserKnownHostsFile {root / 'known_hosts_wrong'}",
            "Host tp-down", f"  Port {_free_port()}", *common, f"  UserKnownHostsFile {root / 'known_hosts'}",
            "Host 127.0.0.1", *common[1:], f"  UserKnownHostsFile {root / 'known_hosts'}", ""]))
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + SETUP_WAIT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        self.stop()
        error = self.process.stderr.read().decode(errors="replace")[-300:] if self.process.stderr else ""
        pytest.skip(f"sshd did not start on 127.0.0.1:{self.port}: {error.strip() or 'no message'}")

    @property
    def url(self) -> str:
        return f"ssh://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for run in self.runs():  # left by a failed test: ended, so that nothing outlives the tests
            try:
                os.killpg(int((run / "pid").read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def runs(self) -> list[Path]:
        runs = self.remote_home / "runs"
        return sorted(runs.iterdir()) if runs.exists() else []


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if SSHD is None:
        pytest.skip("sshd is not installed (Debian: apt-get install openssh-server; `make test` does it where it can)")
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client installed")
    instance = Server(tmp_path_factory.mktemp("sshd"))
    yield instance
    instance.stop()


def evaluate_on(server: Server, out: Path, *targets: str, args: tuple[str, ...] = (), remote_python: str | None = None,
                app: str = "builtin:classifier") -> subprocess.CompletedProcess:
    on = [item for target in targets for item in ("--on", target)]
    return run_torchport("evaluate", app, *on, "--ssh-config", str(server.config), "--remote-python",
                         remote_python or sys.executable, "-b", "cpu", *QUICK, *args, "--out-dir", str(out), timeout=900)


def manifest(out: Path) -> dict:
    return json.loads((out / "targets.json").read_text())


def rows(out: Path) -> dict[str, dict]:
    return {row["name"]: row for row in manifest(out)["targets"]}


def processes_in(folder: Path) -> list[str]:
    """Processes whose working folder or command line is inside FOLDER (on this machine, which is the remote too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(folder)) or str(folder) in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


# -- parsing and packing (no server)

@pytest.mark.parametrize("text, destination, port, name", [
    ("ssh://127.0.0.1:2222", "127.0.0.1", 2222, "127.0.0.1-2222"),
    ("ssh://me@gpu-box", "me@gpu-box", None, "me@gpu-box"),
    ("ssh://[::1]:22", "[::1]", 22, "__1-22"),
    ("my-tpu-vm", "my-tpu-vm", None, "my-tpu-vm"),
])
def test_targets_parse(text, destination, port, name):
    target = parse_target(text)
    assert (target.kind, target.destination, target.port, target.name) == ("ssh", destination, port, name)


@pytest.mark.parametrize("text, destination, name", [
    ("sky:tpu-v6e-1", "tpu-v6e-1:1", "sky-tpu-v6e-1-1"), ("sky:H100:8", "H100:8", "sky-H100-8"),
    ("sky:Trainium2:1", "Trainium2:1", "sky-Trainium2-1"),
])
def test_sky_targets_parse(text, destination, name):
    target = parse_target(text)
    assert (target.kind, target.destination, target.name) == ("sky", destination, name)


@pytest.mark.parametrize("text", ["ssh://-oProxyCommand=touch", "ssh://host;rm", "-oProxyCommand=x", "ssh://a b",
                                  "ssh://host:99999", "sky:", "sky:H100:0", "sky:H100;rm"])
def test_bad_targets_are_refused(text):
    with pytest.raises(UserError):
        parse_target(text)


def test_bad_target_is_one_line_on_the_command_line():
    completed = run_torchport("evaluate", "--on", "ssh://-oProxyCommand=touch", "--no-trace", "--no-checks")
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "invalid host" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_remote_command_is_quoted_arguments():
    hostile = "x'; touch /tmp/pwned; echo '"
    argv = ssh_command(parse_target("ssh://127.0.0.1:22"), ["echo", hostile, "$(id)"])
    assert argv[:2] == ["ssh", "-o"] and "--" in argv
    import shlex

    # What the remote shell reads back is exactly the argument list.
    assert shlex.split(argv[-1]) == ["echo", hostile, "$(id)"]
    assert not any("StrictHostKeyChecking" in item for item in argv)


def test_forwarded_arguments_drop_this_machines_options():
    argv = ["builtin:gpt", "--on", "local", "--on=ssh://h", "-b", "cpu", "--out-dir", "x", "-oy", "--keep-remote",
            "--ssh-config", "c", "--format=text", "--steps", "4"]
    assert forwarded_arguments(argv) == ["builtin:gpt", "-b", "cpu", "--steps", "4"]


def test_clean_line_escapes_and_caps():
    text = clean_line("\x1b]0;t\x07\x1b[2J\u202eok\x9b" + "A" * 1000, 100)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\x9b" not in text
    assert "\\x1b" in text and "\\u202e" in text and text.endswith("more characters)")


def test_pack_respects_gitignore_and_cap(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("data/\n*.ckpt\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"0" * 4_000_000)
    (tmp_path / "model.ckpt").write_bytes(b"0" * 10)
    assert sorted(ship.folder_files(tmp_path)) == [".gitignore", "train.py"]
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(ship.pack_folder(tmp_path, 1_000_000))) as archive:
        assert sorted(archive.getnames()) == [".gitignore", "train.py"]
    (tmp_path / "notes.bin").write_bytes(b"0" * 2_000_000)
    with pytest.raises(UserError, match="above the 1 MB cap.*notes.bin"):
        ship.pack_folder(tmp_path, 1_000_000)


def test_wheel_is_the_running_code():
    import zipfile

    import torchport

    wheel = ship.build_wheel()
    assert wheel == ship.build_wheel()  # the same code gives the same wheel, so the remote venv is reused
    assert wheel.filename == f"torchport-{torchport.__version__}+t{wheel.key}-py3-none-any.whl"
    with zipfile.ZipFile(__import__("io").BytesIO(wheel.data)) as archive:
        source = Path(torchport.__file__).resolve().parent / "remote" / "runner.py"
        assert archive.read("torchport/remote/runner.py") == source.read_bytes()
        assert not any(name.startswith("torch/") or "requires-dist: torch" in name.lower() for name in archive.namelist())


# -- against the real sshd

@pytest.fixture(scope="module")
def first_run(server, tmp_path_factory):
    out = tmp_path_factory.mktemp("first")
    completed = evaluate_on(server, out, "local", server.url)
    return out, completed


def test_local_and_ssh_evaluate_side_by_side(server, first_run):
    out, completed = first_run
    assert completed.returncode == 0, completed.stderr[-3000:]
    name = f"127.0.0.1-{server.port}"
    found = rows(out)
    assert found["local"]["status"] == "ok" and found[name]["status"] == "ok", found
    assert found[name]["venv"] == "created"
    local = json.loads((out / "local" / "result.json").read_text())
    remote = json.loads((out / name / "result.json").read_text())
    assert local["backends"]["cpu"]["summary"] and remote["backends"]["cpu"]["summary"]
    # The same evaluation: the same effective configuration on both.
    assert local["backends"]["cpu"]["runs"][0]["config_hash"] == remote["backends"]["cpu"]["runs"][0]["config_hash"]
    # The remote ran in its own venv (the setup checked that torchport is imported from there, not this checkout).
    assert remote["environment"]["executable"].startswith(str(server.remote_home / "venvs"))
    assert local["environment"]["executable"] == sys.executable
    comparison = json.loads((out / "comparison.json").read_text())
    machines = {entry["machine"] for entry in comparison["entries"]}
    assert machines == {"local", name}
    assert f"[{name}] " in completed.stderr and "[local] " in completed.stderr
    assert "# Targets" in (out / "report.md").read_text()
    assert server.runs() == []  # the remote run folder was removed
    assert processes_in(server.remote_home / "runs") == []


def test_second_run_reuses_the_remote_venv(server, first_run, tmp_path):
    completed = evaluate_on(server, tmp_path, "tp-good")
    assert completed.returncode == 0, completed.stderr[-3000:]
    first = rows(first_run[0])[f"127.0.0.1-{server.port}"]
    second = rows(tmp_path)["tp-good"]
    assert second["status"] == "ok" and second["venv"] == "reused"
    venvs = list((server.remote_home / "venvs").iterdir())
    assert len(venvs) == 1, venvs  # no partial or second venv
    print(f"remote setup: first {first['timings']['setup_s']} s (venv created), second "
          f"{second['timings']['setup_s']} s (reused); totals {first['timings']['total_s']} s, "
          f"{second['timings']['total_s']} s")


def test_failures_are_rows_and_the_good_target_completes(server, first_run, tmp_path):
    completed = evaluate_on(server, tmp_path, "tp-good", "tp-wrongkey", "tp-down")
    found = rows(tmp_path)
    assert found["tp-good"]["status"] == "ok", found
    assert completed.returncode == 0
    wrong = found["tp-wrongkey"]
    assert wrong["status"] == "failed" and wrong["cause_kind"] == "host-key-refused"
    assert "\n" not in wrong["cause"] and "never weakens host key checking" in wrong["cause"]
    assert not (tmp_path / "tp-wrongkey").exists()
    down = found["tp-down"]
    assert down["status"] == "failed" and down["cause_kind"] == "unreachable", down
    assert "tp-wrongkey: failed" in completed.stdout and "tp-down: failed" in completed.stdout


def test_script_on_a_remote_with_its_arguments(server, first_run, tmp_path):
    script = TESTS / "scripts" / "agnostic.py"
    # Typed as a user might, relative and unnormalised: the remote still gets the shipped copy's path.
    completed = run_torchport("evaluate", "--script", "./scripts//agnostic.py", "--on", server.url, "--ssh-config", str(server.config),
                              "--remote-python", sys.executable, "-b", "cpu", "--repeats", "1", "--steps", "6",
                              "--blocks", "2", "--max-warmup", "6", "--no-trace", "--no-checks", "--keep-remote",
                              "--out-dir", str(tmp_path), "--", "--epochs", "50", timeout=900, cwd=TESTS)
    assert completed.returncode == 0, completed.stderr[-3000:]
    row = rows(tmp_path)[f"127.0.0.1-{server.port}"]
    assert row["status"] == "ok" and row["venv"] == "reused"
    kept = server.remote_home / "runs" / row["run_id"]
    assert (kept / "app" / "agnostic.py").read_bytes() == script.read_bytes()  # --keep-remote left it
    assert (kept / "out" / "result.json").exists() and (kept / "rc").read_text() == "0"
    shutil.rmtree(kept)
    document = json.loads((tmp_path / row["name"] / "result.json").read_text())
    run = document["backends"]["cpu"]["runs"][0]
    assert run["status"] == "ok" and run["script"]["optimizers"] == ["AdamW"]
    # The shipped copy ran, in the remote run's folder, with the script's own arguments.
    assert document["config"]["script"]["args"] == ["--epochs", "50"]
    assert document["app"]["file"] == str(server.remote_home / "runs" / row["run_id"] / "app" / "agnostic.py")


def test_remote_without_torch_is_a_row(server, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    completed = evaluate_on(server, tmp_path / "out", server.url, remote_python=str(bare / "bin" / "python"))
    assert completed.returncode == 1
    row = rows(tmp_path / "out")[f"127.0.0.1-{server.port}"]
    assert row["status"] == "failed" and row["cause_kind"] == "no-torch", row
    assert "ModuleNotFoundError" in row["cause"] and "never downloads it" in row["cause"]
    assert "Traceback" not in completed.stderr


def test_remote_whose_install_fails_is_a_row_and_local_completes(server, tmp_path):
    """A remote that cannot reach its package index and lacks torchport's requirements: pip fails there."""
    home = tmp_path / "fresh-remote-home"  # no venv yet, so the remote must install
    python = tmp_path / "python-no-index"
    # The remote's own environment, as its login would set it: an index at a closed port, and
    # torchport's requirements to be installed rather than found among the remote's packages.
    python.write_text("#!/bin/sh\n"
                      f"export TORCHPORT_REMOTE_HOME={home} PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= "
                      f"PIP_INDEX_URL=http://127.0.0.1:{_free_port()}/simple PIP_RETRIES=0 PIP_TIMEOUT=5 PIP_IGNORE_INSTALLED=1\n"
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    completed = evaluate_on(server, tmp_path / "out", "local", server.url, remote_python=str(python))
    assert completed.returncode == 0, completed.stderr[-3000:]  # the reference machine, local, has its result
    found = rows(tmp_path / "out")
    assert found["local"]["status"] == "ok", found
    row = found[f"127.0.0.1-{server.port}"]
    assert row["status"] == "failed" and row["cause_kind"] == "install-failed", row
    assert "installing torchport on the remote failed" in row["cause"] and "\n" not in row["cause"]
    # pip's own words, from the remote's stderr, are in the row, the summary and the report.
    tail = "\n".join(row["stderr_tail"])
    assert "setup step failed" in tail and "pip" in tail, tail
    assert "127.0.0.1" in tail or "satisfies the requirement" in tail, tail
    assert f"127.0.0.1-{server.port}: failed" in completed.stdout and "    | " in completed.stdout
    assert "output tail" in (tmp_path / "out" / "report.md").read_text()
    assert "Traceback" not in completed.stderr
    # Nothing half-made is left there: no venv, no partial one, no run.
    assert list((home / "venvs").iterdir()) == [] and not (home / "runs").exists()
    assert not (tmp_path / "out" / row["name"]).exists()


def test_hostile_remote_output_is_escaped_and_capped(server, first_run, tmp_path):
    completed = evaluate_on(server, tmp_path, server.url, app=str(TESTS / "apps" / "remote" / "hostile.py"))
    assert completed.returncode == 1
    row = rows(tmp_path)[f"127.0.0.1-{server.port}"]
    assert row["status"] == "failed" and row["cause_kind"] == "run-failed"
    # The app's raw text reached the remote's output; what is shown here is escaped.
    for text in (completed.stderr, completed.stdout, (tmp_path / "report.md").read_text(), json.dumps(row)):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert any("\\x1b]0;pwned" in line for line in row["stderr_tail"])
    prefixed = [line for line in completed.stderr.splitlines() if line.startswith("[127.0.0.1-")]
    assert prefixed and max(len(line) for line in prefixed) < 400


def _wait_for_remote_run(server: Server, out: Path) -> tuple[Path, dict]:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        runs = server.runs()
        if runs and (runs[0] / "pid").exists() and (out / "targets.json").exists():
            row = next(iter(rows(out).values()))
            if row.get("status") == "running":
                return runs[0], row
        time.sleep(0.2)
    raise AssertionError("the remote run never started")


def _start(server: Server, out: Path) -> subprocess.Popen:
    # Long enough to be caught running: the kill and Ctrl-C come as soon as the remote run exists.
    return subprocess.Popen(
        [sys.executable, "-m", "torchport", "evaluate", "builtin:classifier", "--on", server.url, "--ssh-config",
         str(server.config), "--remote-python", sys.executable, "-b", "cpu", "--repeats", "2", "--steps", "200",
         "--blocks", "4", "--no-inference", "--no-trace", "--no-checks", "--out-dir", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_killed_connection_leaves_the_run_and_collect_fetches_it(server, first_run, tmp_path):
    process = _start(server, tmp_path)
    run, row = _wait_for_remote_run(server, tmp_path)
    deadline = time.monotonic() + SETUP_WAIT_S
    while not (followers := [line for line in processes_in(Path(row["run_id"]))
                             if " follow " in line and line.split(": ", 1)[1].startswith("ssh ")]):
        assert time.monotonic() < deadline, processes_in(Path(row["run_id"]))
        time.sleep(0.1)
    os.kill(int(followers[0].split(":")[0]), signal.SIGKILL)  # the connection drops
    stdout, stderr = process.communicate(timeout=600)
    found = rows(tmp_path)[f"127.0.0.1-{server.port}"]
    assert found["status"] == "detached" and "torchport collect" in found["cause"], (found, stderr[-2000:])
    assert run.exists()  # the remote run went on
    collected = run_torchport("collect", str(tmp_path), timeout=900)
    assert collected.returncode == 0, collected.stderr[-3000:]
    found = rows(tmp_path)[f"127.0.0.1-{server.port}"]
    assert found["status"] == "ok", found
    result = json.loads((tmp_path / found["name"] / "result.json").read_text())
    assert len(result["backends"]["cpu"]["runs"]) == 2 and result["backends"]["cpu"]["summary"]
    assert not run.exists() and processes_in(run) == []
    assert (tmp_path / "comparison.json").exists()


def test_interrupt_stops_and_cleans_the_remote_run(server, first_run, tmp_path):
    process = _start(server, tmp_path)
    run, row = _wait_for_remote_run(server, tmp_path)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    found = rows(tmp_path)[f"127.0.0.1-{server.port}"]
    assert found["status"] == "interrupted" and found.get("remote_removed"), found
    assert not run.exists()
    assert processes_in(run) == [] and processes_in(Path(row["run_id"])) == []
    assert "stopped by the user" in (tmp_path / "report.md").read_text()


@pytest.mark.xla
def test_prediction_against_measurement_with_xla_standing_in(server, first_run, tmp_path, xla_environment):
    """The local trace's verdict for torch_xla beside the xla backend measured on the remote (and here):
    a local proxy for what a TPU VM would measure."""
    completed = run_torchport("evaluate", "builtin:classifier", "--on", "local", "--on", server.url, "--ssh-config",
                              str(server.config), "--remote-python", sys.executable, "-b", "cpu,xla", *QUICK[:-2],
                              "--no-checks", "--out-dir", str(tmp_path), timeout=1500)
    assert completed.returncode == 0, completed.stderr[-3000:]
    table = manifest(tmp_path)["predictions"]
    assert table["predictor"] == "local"
    remote_name = f"127.0.0.1-{server.port}"
    xla_rows = {row["target"]: row for row in table["rows"] if row["family"] == "xla"}
    assert set(xla_rows) == {"local", remote_name}, table
    local_trace = json.loads((tmp_path / "local" / "result.json").read_text())["trace"]["verdicts"]["xla"]
    remote_xla = json.loads((tmp_path / remote_name / "result.json").read_text())["backends"]["xla"]
    row = xla_rows[remote_name]
    assert row["predicted"] == local_trace["status"]
    assert row["measured"] == ("runs" if remote_xla.get("summary") else row["measured"])
    assert row["hit"] == ((local_trace["status"] != "blocked") == bool(remote_xla.get("summary")))
    assert row["counts"]["measured_compilations"] and row["counts"]["predicted_step_graphs"] >= 1
    assert table["judged"] == len([r for r in table["rows"] if r["hit"] is not None])
    assert "# Prediction against measurement" in (tmp_path / "report.md").read_text()
    assert "prediction against measurement (trace of local)" in completed.stdout


def test_trace_on_local_and_ssh(server, first_run, tmp_path):
    completed = run_torchport("trace", "builtin:classifier", "--steps", "2", "--target", "xla,cuda", "--on", "local",
                              "--on", server.url, "--ssh-config", str(server.config), "--remote-python", sys.executable,
                              "--out-dir", str(tmp_path), timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    name = f"127.0.0.1-{server.port}"
    found = rows(tmp_path)
    assert found["local"]["status"] == "ok" and found[name]["status"] == "ok", found
    local = json.loads((tmp_path / "local" / "trace.json").read_text())
    remote = json.loads((tmp_path / name / "trace.json").read_text())
    assert set(local["verdicts"]) == set(remote["verdicts"]) == {"xla", "cuda"}
    assert {k: v["status"] for k, v in local["verdicts"].items()} == {k: v["status"] for k, v in remote["verdicts"].items()}
    assert f"[{name}]   PyTorch/XLA (torch_xla): " in completed.stderr
    report = (tmp_path / "report.md").read_text()
    assert f"# {name}" in report and "# local" in report


def test_check_on_ssh(server, first_run, tmp_path):
    completed = run_torchport("check", "builtin:classifier", "--only", "checkpoint", "-b", "cpu", "--on", server.url,
                              "--ssh-config", str(server.config), "--remote-python", sys.executable,
                              "--out-dir", str(tmp_path), timeout=900)
    name = f"127.0.0.1-{server.port}"
    row = rows(tmp_path)[name]
    assert completed.returncode == 0 and row["status"] == "ok", (row, completed.stderr[-3000:])
    section = json.loads((tmp_path / name / "check.json").read_text())
    assert [check["name"] for check in section["checks"]] and all(check["name"] == "checkpoint" for check in section["checks"])
    assert all(check["status"] == "pass" for check in section["checks"]), section["checks"]
    assert f"# {name}" in (tmp_path / "report.md").read_text()


def test_what_a_remote_sends_is_read_up_to_a_cap():
    from torchport.remote.runner import read_capped

    endless = subprocess.Popen(["yes", "A" * 100], stdout=subprocess.PIPE)
    overflow: list[str] = []
    data = read_capped(endless.stdout, 1_000_000, endless, overflow)
    assert len(data) <= 1_000_000 and overflow == ["sent more than 1 MB"]
    assert endless.wait() == -signal.SIGKILL


def test_fallback_requirements_match_the_declared_dependencies():
    """A checkout that is not installed ships its wheel with the fallback list:
    it must name every runtime dependency pyproject.toml declares (torch aside,
    which the remote must already have)."""
    import tomllib

    from torchport.remote.ship import FALLBACK_REQUIREMENTS

    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(FALLBACK_REQUIREMENTS) == sorted(d for d in declared if not d.startswith("torch"))
