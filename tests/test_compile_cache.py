"""A compiled worker killed mid-compile must not break later compiles: real
torch.compile runs on a private inductor cache, a real supervised process ended
on its timeout."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from torchport import compile_cache
from torchport.launch import supervise, worker_environment

_COMPILE = textwrap.dedent("""
    import torch

    def f(x):
        return torch.sin(x) * 2 + x.cos()

    print(round(torch.compile(f)(torch.arange(64, dtype=torch.float32)).sum().item(), 4))
""")


def _compile(cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True, text=True, timeout=600)


def _libraries(cache: Path) -> list[Path]:
    return sorted(cache.rglob("*.so"))


def test_a_half_written_kernel_library_breaks_every_later_compile_until_removed(tmp_path):
    cache = tmp_path / "cache"
    first = _compile(cache)
    assert first.returncode == 0, first.stderr[-2000:]
    libraries = _libraries(cache)
    assert libraries and all(compile_cache.is_whole_library(path) for path in libraries)

    for path in libraries:  # as a compiler killed half-way leaves them
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    broken = _compile(cache)
    # How it fails depends on the library: the kernel's reads "file too short", a cut
    # vector-ISA probe turns into a C++ compile error.
    assert broken.returncode != 0, broken.stdout

    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    assert compile_cache.cache_folder(env) == cache
    removed = compile_cache.remove_unfinished(env, since=0)
    assert sorted(removed) == libraries
    again = _compile(cache)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout == first.stdout


def test_only_libraries_written_since_the_process_started_are_read(tmp_path):
    old = tmp_path / "ab" / "old.so"
    old.parent.mkdir()
    old.write_bytes(b"")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    new = tmp_path / "ab" / "new.so"
    new.write_bytes(b"\x7fELF")
    other = tmp_path / "ab" / "kernel.cpp"
    other.write_text("")
    assert compile_cache.unfinished_libraries(tmp_path, since=time.time() - 60) == [new]


def test_supervise_removes_what_a_process_it_timed_out_left_half_written(tmp_path):
    cache = tmp_path / "cache"
    library = cache / "xy" / "cxy.main.so"
    writer = textwrap.dedent(f"""
        import pathlib, time
        path = pathlib.Path({str(library)!r})
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\\x7fELF" + bytes(12))
        time.sleep(60)
    """)
    env = dict(worker_environment(), TORCHINDUCTOR_CACHE_DIR=str(cache))
    ended = supervise([sys.executable, "-c", writer], env, timeout=3)
    assert ended.timed_out
    assert ended.removed_from_cache == (str(library),)
    assert not library.exists()


def test_a_process_that_ends_by_itself_leaves_the_cache_alone(tmp_path):
    cache = tmp_path / "cache"
    library = cache / "xy" / "cxy.so"
    writer = f"import pathlib; p = pathlib.Path({str(library)!r}); p.parent.mkdir(parents=True); p.write_bytes(b'')"
    env = dict(worker_environment(), TORCHINDUCTOR_CACHE_DIR=str(cache))
    ended = supervise([sys.executable, "-c", writer], env, timeout=60)
    assert ended.exit_code == 0 and ended.removed_from_cache == ()
    assert library.exists()


def test_a_library_another_process_is_still_writing_is_kept(tmp_path):
    library = tmp_path / "cache" / "xy" / "cxy.so"
    library.parent.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        handle = open({str(library)!r}, "wb")
        handle.write(b"\\x7fELF")
        handle.flush()
        print("open", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
        assert compile_cache.unfinished_libraries(tmp_path / "cache", since=0) == [library]
        assert compile_cache.remove_unfinished(env, since=0) == []
        assert library.exists()
    finally:
        writer.kill()
        writer.wait()
    assert compile_cache.remove_unfinished(env, since=0) == [library]


def test_the_first_compiled_worker_sweeps_what_others_left_long_ago(tmp_path):
    cache = tmp_path / "cache"
    stale = cache / "ab" / "stale.main.so"
    fresh = cache / "ab" / "fresh.main.so"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    os.utime(stale, (time.time() - 600, time.time() - 600))
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    assert compile_cache.sweep_once(env) == [stale]
    assert fresh.exists()  # maybe still being written: a minute's grace
    stale.write_bytes(b"")
    os.utime(stale, (time.time() - 600, time.time() - 600))
    assert compile_cache.sweep_once(env) == []  # once per process


def test_a_compiled_run_starts_on_a_swept_cache(tmp_path):
    from torchport.launch import run_worker
    cache = tmp_path / "cache"
    stale = cache / "ab" / "stale.main.so"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    os.utime(stale, (time.time() - 600, time.time() - 600))
    run = run_worker("cpu-compile", "torchport.worker:no_such_job", env={"TORCHINDUCTOR_CACHE_DIR": str(cache)},
                     timeout=120)
    assert run.status != "ok"  # the job itself is beside the point
    assert not stale.exists()
