"""Round 52 (docs/precision/round52.md): private functions that only a script block past a CUDA exit
calls.  From the verdicts of seed 642689: torchebm's Triton benchmark ``torchebm/cuda/fused_langevin.py``
times its kernels in ``_main()`` and ``_bench()``, which only ``if __name__ == "__main__":`` calls,
after ``if not torch.cuda.is_available(): raise SystemExit("CUDA device required")``.  Beside it, the
calls and exits that still let the CUDA lines run without CUDA."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_BENCHMARK = '''
    import sys

    import torch


    def _bench(fn, n_iters=10):
        start = torch.cuda.Event(enable_timing=True)  # quiet
        end = torch.cuda.Event(enable_timing=True)  # quiet
        start.record()
        for _ in range(n_iters):
            fn()
        end.record()
        torch.cuda.synchronize()  # quiet
        return start.elapsed_time(end) / n_iters


    def _main():
        x = torch.randn(1024, device="cuda")  # quiet
        print(_bench(lambda: x * 2))


    @torch.no_grad()
    def _report():
        print(torch.cuda.get_device_name())  # quiet
'''


def test_private_functions_only_a_script_block_calls_past_a_cuda_exit_are_info(tmp_path: Path) -> None:
    raised = _write(tmp_path, "fused.py", _BENCHMARK + '''

    def main():
        x = torch.randn(8, device="cuda")  # kept
        return x


    if __name__ == "__main__":
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
        _main()
        _report()
        main()
    ''')
    exited = _write(tmp_path, "exited.py", _BENCHMARK + '''

    if __name__ == '__main__':
        if not torch.cuda.is_available():
            print("this benchmark needs an NVIDIA GPU")
            sys.exit(1)
        _main()
        _report()
    ''')
    check_marked_lines([tmp_path], (raised, exited))
    _, reason = worst_by_line(tmp_path)[("fused.py", 18, "TP001")]
    assert reason.startswith("in _main, which this file calls only after"), reason


def test_the_benchmark_really_stops_before_its_cuda_lines(tmp_path: Path) -> None:
    """Run as a script on this CPU build: it exits with the message, and no CUDA call raises first."""
    script = _write(tmp_path, "fused.py", _BENCHMARK + '''

    if __name__ == "__main__":
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
        _main()
    ''')
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and result.stderr.strip().endswith("CUDA device required"), result.stderr


def _kept(tmp_path: Path, block: str) -> None:
    kept_lines_stay(_write(tmp_path, "fused.py", _BENCHMARK.replace("# quiet", "# kept") + block))


def test_a_call_before_the_exit_keeps_it(tmp_path: Path) -> None:
    _kept(tmp_path, '''

    if __name__ == "__main__":
        _report()
        _main()
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
    ''')


def test_an_exit_that_also_needs_an_option_keeps_it(tmp_path: Path) -> None:
    _kept(tmp_path, '''

    if __name__ == "__main__":
        if not torch.cuda.is_available() and "--strict" in sys.argv:
            raise SystemExit("CUDA device required")
        _main()
        _report()
    ''')


def test_a_warning_without_an_exit_keeps_it(tmp_path: Path) -> None:
    _kept(tmp_path, '''

    if __name__ == "__main__":
        if not torch.cuda.is_available():
            print("no GPU: this will fail")
        _main()
        _report()
    ''')


def test_a_call_outside_the_script_block_keeps_it(tmp_path: Path) -> None:
    _kept(tmp_path, '''

    RESULTS = [_main, _report]

    if __name__ == "__main__":
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
        _main()
    ''')


def test_a_block_that_is_not_the_script_block_keeps_it(tmp_path: Path) -> None:
    _kept(tmp_path, '''

    if __name__ != "__main__":
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
        _main()
        _report()
    ''')


# The shapes an independent review found the first version lowered though a user without CUDA
# reaches the line (each ran on the CPU build and failed at the CUDA call).
_MAIN = '''
    def _main():
        x = torch.ones(2, device="cuda")  # kept
        print(x)
'''
_STOPS = '''

    if __name__ == "__main__":
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
        _main()
'''


def test_a_registered_or_decorated_function_keeps_it(tmp_path: Path) -> None:
    kept_lines_stay(_write(tmp_path, "registered.py", '''
    import atexit

    import torch


    @atexit.register''' + _MAIN + _STOPS))


def test_a_function_handed_to_a_decorator_keeps_it(tmp_path: Path) -> None:
    kept_lines_stay(_write(tmp_path, "handed.py", '''
    import torch
    ''' + _MAIN + '''

    def with_setup(setup):
        def wrap(fn):
            def run(*args):
                setup()
                return fn(*args)
            return run
        return wrap


    @with_setup(_main)
    def step(x):
        return x * 2


    def main():
        print(step(torch.ones(2)))
    ''' + _STOPS.replace('        _main()', '        main()\n        _main()')))


def test_a_name_looked_up_by_string_keeps_it(tmp_path: Path) -> None:
    kept_lines_stay(_write(tmp_path, "looked_up.py", '''
    import sys

    import torch
    ''' + _MAIN + '''

    if __name__ == "__main__":
        globals()["_" + sys.argv[1]]()
        if not torch.cuda.is_available():
            raise SystemExit("CUDA device required")
        _main()
    '''))


def test_an_exit_name_bound_to_something_else_keeps_it(tmp_path: Path) -> None:
    kept_lines_stay(_write(tmp_path, "own_exit.py", '''
    import torch


    def exit(message=""):
        print("warning:", message)
    ''' + _MAIN + '''

    if __name__ == "__main__":
        if not torch.cuda.is_available():
            exit("no GPU: results will be slow")
        _main()
    '''))


def test_a_function_another_module_of_the_package_imports_keeps_it(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    _write(package, "__init__.py", "")
    _write(package, "cli.py", '''
    import sys

    from .fused import _main


    if __name__ == "__main__":
        if sys.argv[1:] == ["bench"]:
            _main()
    ''')
    kept_lines_stay(_write(package, "fused.py", '''
    import torch
    ''' + _MAIN + _STOPS), root=tmp_path)
    listed = tmp_path / "listed"
    _write(listed, "__init__.py", "from .fused import *\n")
    kept_lines_stay(_write(listed, "fused.py", '''
    import torch

    __all__ = ["_main"]
    ''' + _MAIN + _STOPS), root=listed)
