"""Round 18a: code a user without CUDA never reaches because of who calls it
(docs/precision/round18a.md).  A function whose only callers in the scanned files run under a
CUDA test, or that nothing in the scanned files names at all (a private function, a private
method of a class with no outside base, a function of a script), has its findings lowered to
info; a caller elsewhere, a mention in a string, a public function and a hook a framework base
may call keep them.  The snippets are written for these tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import ALL_TARGETS, worst_by_line
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan


_BLOCK = '''
    import torch
    from torch import nn


    class FastAttention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.graph = None

        def _captured_split(self, fused):
            if self.graph is None:
                self.graph = torch.cuda.CUDAGraph()
                stream = torch.cuda.current_stream()
            return fused.chunk(3, dim=-1)

        def forward(self, hidden):
            fused = self.qkv(hidden)
            if hidden.size(1) == 1 and hidden.device.type == "cuda":
                q, k, v = self._captured_split(fused)
            else:
                q, k, v = fused.chunk(3, dim=-1)
            return q + k + v
'''


def _package(root: Path, block: str = _BLOCK, **files: str) -> Path:
    _write(root, "fastblock/__init__.py", "")
    _write(root, "fastblock/block.py", block)
    for name, text in files.items():
        _write(root, f"fastblock/{name}.py", text)
    return root


def test_method_called_only_for_cuda_tensors_is_info(tmp_path):
    found = _package(tmp_path)
    severity, reason = worst_by_line(found)[("block.py", 13, "TP108")]
    assert severity == "info"
    assert "`_captured_split` is called only where" in reason and "block.py:20" in reason
    assert worst_by_line(found)[("block.py", 14, "TP107")][0] == "info"


def test_method_also_called_unguarded_elsewhere_stays(tmp_path):
    found = worst_by_line(_package(tmp_path, bench="""
        from fastblock.block import FastAttention


        def bench(attention, fused):
            return attention._captured_split(fused)
    """))
    assert found[("block.py", 13, "TP108")][0] == "error"


def test_method_called_unguarded_in_its_file_stays(tmp_path):
    block = _BLOCK.replace('if hidden.size(1) == 1 and hidden.device.type == "cuda":',
                           'if hidden.size(1) == 1:')
    assert worst_by_line(_package(tmp_path, block))[("block.py", 13, "TP108")][0] == "error"


_SEPARATOR = '''
    import torch


    class Separator:
        def __init__(self):
            self.device = torch.device("cpu")
            if torch.cuda.is_available():
                self.configure_cuda()

        def configure_cuda(self):
            torch.backends.cudnn.benchmark = True
            self.device = torch.device("cuda")
            self.stream = torch.cuda.Stream()
'''


def test_method_called_only_when_cuda_is_available_is_info(tmp_path):
    found = worst_by_line(_package(tmp_path, _SEPARATOR))
    severity, reason = found[("block.py", 13, "TP107")]
    assert severity == "info"
    assert "`configure_cuda` is called only where `torch.cuda.is_available()` holds" in reason


def test_method_called_by_the_user_in_another_file_stays(tmp_path):
    found = worst_by_line(_package(tmp_path, _SEPARATOR, cli="""
        from fastblock.block import Separator


        def run():
            separator = Separator()
            separator.configure_cuda()
    """))
    assert found[("block.py", 13, "TP107")][0] == "error"


_MEMORY = '''
    import torch


    def _peak_memory_report():
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.max_memory_allocated()


    def peak_memory():
        return torch.cuda.max_memory_allocated()
'''


def test_private_function_nothing_names_is_info(tmp_path):
    found = worst_by_line(_package(tmp_path, _MEMORY))
    severity, reason = found[("block.py", 5, "TP112")]
    assert severity == "info" and "`_peak_memory_report` is never called" in reason
    assert found[("block.py", 6, "TP104")][0] == "info"


def test_public_function_the_package_exports_stays(tmp_path):
    # API: a user of the library may call it, however little the package does
    root = _package(tmp_path, _MEMORY)
    _write(root, "fastblock/__init__.py", "from .block import peak_memory\n")
    assert worst_by_line(root)[("block.py", 10, "TP104")][0] == "silent"


def test_public_function_nothing_names_is_info_since_round_63(tmp_path):
    # judges called 29 of 30 rows in such functions wrong (docs/precision/round63.md)
    severity, reason = worst_by_line(_package(tmp_path, _MEMORY))[("block.py", 10, "TP104")]
    assert severity == "info" and "calls or names function peak_memory" in reason


def test_private_function_named_in_a_string_stays(tmp_path):
    found = worst_by_line(_package(tmp_path, _MEMORY, hooks="""
        import importlib

        REPORTS = {"peak": "_peak_memory_report"}


        def report(kind):
            module = importlib.import_module("fastblock.block")
            return getattr(module, REPORTS[kind])()
    """))
    assert found[("block.py", 5, "TP112")][0] == "error"


def test_private_hook_of_a_framework_base_stays(tmp_path):
    # nn.Module calls _load_from_state_dict itself: no name in the package is needed
    found = worst_by_line(_package(tmp_path, '''
        import torch
        from torch import nn


        class Cached(nn.Module):
            def _load_from_state_dict(self, *args):
                torch.cuda.synchronize()
                return super()._load_from_state_dict(*args)
    '''))
    assert found[("block.py", 7, "TP101")][0] == "error"


_SCRIPT = '''
    import torch


    def profile(model, batch):
        torch.cuda.synchronize()
        return model(batch)


    def main():
        model = torch.nn.Linear(2, 2)
        print(model(torch.zeros(1, 2)))


    if __name__ == "__main__":
        main()
'''


def test_script_function_nothing_calls_is_info(tmp_path):
    _write(tmp_path, "examples/demo.py", _SCRIPT)
    severity, reason = worst_by_line(tmp_path)[("demo.py", 5, "TP101")]
    assert severity == "info" and "`profile` is never called" in reason


def test_script_function_its_main_calls_stays(tmp_path):
    _write(tmp_path, "examples/demo.py", _SCRIPT.replace("print(model(torch.zeros(1, 2)))",
                                                        "print(profile(model, torch.zeros(1, 2)))"))
    assert worst_by_line(tmp_path)[("demo.py", 5, "TP101")][0] == "error"


def test_lone_module_function_nothing_calls_stays(tmp_path):
    # no `if __name__ == "__main__":`: a module a user imports, not a program
    _write(tmp_path, "tools/memory.py", _SCRIPT.split("\n\n\n    def main")[0])
    assert worst_by_line(tmp_path)[("memory.py", 5, "TP101")][0] == "error"


_MEMORY_BY_DEVICE = '''
    import torch


    def should_save_memory(devices, cells):
        if all(device.type == "cpu" for device in devices):
            return cells > 200_000
        if all(device.type == "cuda" for device in devices):
            return _should_save_cuda(devices, cells)
        return True


    def _should_save_cuda(devices, cells):
        free = min(_free_cuda_bytes(device) for device in devices)
        return cells * 4 > free


    def _free_cuda_bytes(device):
        free, total = torch.cuda.mem_get_info(device)
        return free
'''


def test_function_reached_through_a_caller_under_a_cuda_test_is_info(tmp_path):
    severity, reason = worst_by_line(_package(tmp_path, _MEMORY_BY_DEVICE))[("block.py", 18, "TP111")]
    assert severity == "info"
    assert "`all(device.type == \"cuda\" for device in devices)`" in reason and "through `_should_save_cuda`" in reason


def test_function_whose_caller_is_also_called_unguarded_stays(tmp_path):
    found = worst_by_line(_package(tmp_path, _MEMORY_BY_DEVICE, planner="""
        from fastblock.block import _should_save_cuda


        def plan(devices):
            return _should_save_cuda(devices, 10)
    """))
    assert found[("block.py", 18, "TP111")][0] in ("silent", "error")


def test_one_file_of_a_package_scanned_alone_stays(tmp_path):
    # its callers may be in the package's other files, which this scan does not read
    block = _package(tmp_path, _MEMORY) / "fastblock" / "block.py"
    result = scan([block], ScanConfig(), jobs=1)
    found = {(f.line, f.rule_id): finding_worst(f, ALL_TARGETS) for f in result.findings}
    assert found[(5, "TP112")] == "error"
