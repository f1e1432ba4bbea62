"""Shell completion generated from the parser, exercised in the real shells."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import run_torchport


def script(shell: str, tmp_path) -> str:
    completed = run_torchport("completion", shell)
    assert completed.returncode == 0, completed.stderr
    path = tmp_path / f"torchport.{shell}"
    path.write_text(completed.stdout)
    return str(path)


def bash_complete(path: str, *words: str) -> list[str]:
    program = (f"source {path}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
               "_torchport; printf '%s\\n' \"${COMPREPLY[@]}\"")
    completed = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.split()


def test_bash_completes_commands_options_and_subcommands(tmp_path):
    path = script("bash", tmp_path)
    assert bash_complete(path, "torchport", "ev") == ["evaluate"]
    assert "--repeats" in bash_complete(path, "torchport", "evaluate", "--rep")
    assert bash_complete(path, "torchport", "-q", "sc") == ["scan", "schema"]
    assert bash_complete(path, "torchport", "env", "cr") == ["create"]
    assert bash_complete(path, "torchport", "env", "create", "--fo") == ["--force"]
    assert "--fail-on" in bash_complete(path, "torchport", "scan", "--fail")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts(shell, tmp_path):
    path = script(shell, tmp_path)
    executable = shutil.which(shell)
    if executable is None:
        pytest.skip(f"{shell} is not installed here: its script was generated, not run")
    if shell == "fish":
        completed = subprocess.run([executable, "-c", f"source {path}; complete -C 'torchport eva'"],
                                   capture_output=True, text=True, timeout=30)
        assert completed.returncode == 0 and "evaluate" in completed.stdout, completed.stdout + completed.stderr
    else:
        completed = subprocess.run([executable, "-c", f"source {path}; whence -w _torchport"],
                                   capture_output=True, text=True, timeout=30)
        assert completed.returncode == 0 and "function" in completed.stdout, completed.stdout + completed.stderr
