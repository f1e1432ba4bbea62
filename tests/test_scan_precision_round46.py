"""Round 46 (docs/precision/round46.md): nvidia-smi looked up on PATH first.  From the verdicts of
seed 508736 (both judges): sleap-nn's ``get_gpu_memory`` returns ``[]`` when
``shutil.which("nvidia-smi") is None`` and only then builds the nvidia-smi command, and
``get_nvidia_driver_version`` returns None when ``not shutil.which("nvidia-smi")``; the lookup
itself was reported too.  Beside them, the calls the lookup does not keep from running."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay
from scan_marks import write_snippet as _write

_PROBES = '''
    import shutil
    import subprocess
    from shutil import which


    def get_gpu_memory():
        if shutil.which("nvidia-smi") is None:  # quiet
            return []
        command = ["nvidia-smi", "--query-gpu=index,memory.free", "--format=csv"]  # quiet
        return subprocess.run(command, capture_output=True).stdout


    def driver_version():
        if not which("nvidia-smi"):  # quiet
            return None
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version"])  # quiet


    def refuses():
        # without nvidia-smi the function refuses to run: that is the lock-in
        if not shutil.which("nvidia-smi"):  # quiet
            raise RuntimeError("needs an NVIDIA driver")
        return subprocess.run(["nvidia-smi", "-L"])  # kept


    def runs_the_answer():
        smi = shutil.which("nvidia-smi")  # kept
        return subprocess.check_output([smi, "-L"])


    def inside_the_missing_branch():
        if not shutil.which("nvidia-smi"):  # quiet
            out = subprocess.check_output(["nvidia-smi", "-L"])  # kept
            return out
        return None


    def which_of_its_own():
        if fake.which("nvidia-smi"):  # kept
            return subprocess.run(["nvidia-smi", "-L"])  # kept
        return None


    def when_present():
        if shutil.which("nvidia-smi") is not None:  # quiet
            subprocess.run(["nvidia-smi", "-L"])  # quiet
        else:
            subprocess.run(["nvidia-smi", "-q"])  # kept


    def unguarded():
        return subprocess.run(["nvidia-smi"])  # kept


    def only_warns():
        if not shutil.which("nvidia-smi"):  # quiet
            print("nvidia-smi is missing")
        return subprocess.run(["nvidia-smi"])  # kept


    def checked_too_late():
        out = subprocess.run(["nvidia-smi"])  # kept
        if shutil.which("nvidia-smi") is None:  # quiet
            return None
        return out


    def forced(force):
        if shutil.which("nvidia-smi") or force:  # quiet
            subprocess.run(["nvidia-smi", "-L"])  # kept


    def check():
        if not shutil.which("nvidia-smi"):  # quiet
            return False
        return True


    def elsewhere():
        check()
        return subprocess.run(["nvidia-smi"])  # kept
'''


def test_nvidia_smi_run_only_where_a_lookup_found_it_is_quiet(tmp_path: Path) -> None:
    probes = _write(tmp_path, "probes.py", _PROBES)
    check_marked_lines([probes], (probes,))


def test_a_which_of_the_files_own_is_no_lookup(tmp_path: Path) -> None:
    probes = _write(tmp_path, "own_which.py", '''
        import shutil
        import subprocess
        from shutil import which


        def which(program):  # shadows shutil's
            return shutil.which(program) or program


        def names():
            if which("nvidia-smi"):  # kept
                return subprocess.run(["nvidia-smi", "-L"])  # kept
            return None
    ''')
    kept_lines_stay(probes)
