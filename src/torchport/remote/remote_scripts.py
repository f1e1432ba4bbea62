"""The fixed programs run by the remote's own Python before torchport is installed there.

Each is passed as ``python -c PROGRAM ARG...``: the program is constant, the
arguments are data.  Only the standard library is used.
"""
from __future__ import annotations

# Finds the interpreter (exit 127 when it is missing) before running a program with it.
RUN_PYTHON = 'command -v "$1" >/dev/null 2>&1 || { echo "no $1 on the remote" >&2; exit 127; }; exec "$@"'

MARKER = "torchport-remote-json:"

# argv: KEY.  Prints MARKER + JSON: the interpreter, its torch's version, the folder
# torchport uses there and whether the venv for KEY and this interpreter is ready
# (each Python gets its own: another Python means another torch).
PROBE = r'''
import hashlib, json, os, site, sys
from pathlib import Path
base = Path(os.environ.get("TORCHPORT_REMOTE_HOME") or Path.home() / ".cache" / "torchport" / "remote")
venv = sys.argv[1] + "-" + hashlib.sha256(sys.executable.encode()).hexdigest()[:8]
record = {"python": ".".join(map(str, sys.version_info[:3])), "executable": sys.executable,
          "in_venv": sys.prefix != sys.base_prefix, "site": site.getsitepackages(), "base": str(base), "venv": venv,
          "venv_ready": (base / "venvs" / venv / ".torchport-ready").exists(), "torch": None, "torch_error": None}
# Found, not imported (seconds saved on every run); setup imports it before a venv is marked ready.
import importlib.metadata, importlib.util
try:
    if importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError("No module named 'torch'")
    record["torch"] = importlib.metadata.version("torch")
except BaseException as exc:
    record["torch_error"] = f"{type(exc).__name__}: {exc}"[:300]
print("torchport-remote-json:" + json.dumps(record))
'''

# argv: KEY WHEEL_FILENAME REQUIREMENTS_JSON; the wheel on stdin.  Creates
# BASE/venvs/KEY-PYTHONHASH (system site packages seen, and the packages of the venv
# this Python belongs to, so the torch already there is used, never
# downloaded), installs the wheel and the other requirements, and checks
# that torchport is imported from the new venv.  Built beside and renamed,
# so a venv is either ready or absent.
SETUP = r'''
import hashlib, json, os, shutil, site, subprocess, sys, tempfile, venv
from pathlib import Path
key, wheel_name, requirements = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
key += "-" + hashlib.sha256(sys.executable.encode()).hexdigest()[:8]
base = Path(os.environ.get("TORCHPORT_REMOTE_HOME") or Path.home() / ".cache" / "torchport" / "remote")
final = base / "venvs" / key
if (final / ".torchport-ready").exists():
    print("reused"); sys.exit(0)
(base / "venvs").mkdir(parents=True, exist_ok=True)
tmp = Path(tempfile.mkdtemp(prefix=key + ".partial.", dir=base / "venvs"))
try:
    wheel = tmp / wheel_name
    wheel.write_bytes(sys.stdin.buffer.read())
    env = tmp / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True, symlinks=True).create(env)
    python = str(env / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    if sys.prefix != sys.base_prefix:
        # addsitedir, not a bare path: the .pth files of those folders count too.
        lines = [f"import site; site.addsitedir({path!r})" for path in site.getsitepackages()]
        Path(purelib, "_torchport_base.pth").write_text("\n".join(lines) + "\n")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input"]
    # The wheel alone, even when another torchport is visible through the shared packages.
    subprocess.run([*pip, "--no-deps", "--ignore-installed", str(wheel)], check=True)
    if requirements:
        subprocess.run([*pip, *requirements], check=True)
    where = subprocess.run([python, "-c", "import torch, torchport; print(torchport.__file__)"],
                           check=True, capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(env)):
        sys.exit(f"torchport is imported from {where}, not from the new venv")
    wheel.unlink()
    (env / ".torchport-ready").write_text(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        env.rename(final)
    except OSError:
        if not (final / ".torchport-ready").exists():  # not another run's finished venv
            raise
    print("created")
except subprocess.CalledProcessError as exc:
    sys.exit(f"setup step failed (exit {exc.returncode}): {' '.join(map(str, exc.cmd))[:300]}\n{(exc.stderr or '')[-2000:]}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
'''
