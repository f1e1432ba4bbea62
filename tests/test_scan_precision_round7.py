"""Round 7: severity by evidence (docs/precision/policy.md).  Each shape that independent
judges found mostly wrong at error/silent is lowered; each test also keeps a close true
lock-in line at error/silent, so recall does not drop."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

ALL_TARGETS = ScanConfig().targets


def _write(root: Path, name: str, source: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def _marked(path: Path, mark: str) -> set[int]:
    return {n for n, line in enumerate(path.read_text().splitlines(), 1) if line.endswith(f"# {mark}")}


def _check(root: Path, *paths: Path) -> None:
    """Lines ending in ``# quiet`` must not be error/silent (a lowered finding is still reported);
    lines ending in ``# kept`` must stay error/silent."""
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    by_file = {p.resolve(): p for p in paths}
    serious = set()
    for f in result.findings:
        path = next((p for full, p in by_file.items() if str(full).endswith(f.path)), None)
        if path is None:
            continue
        if finding_worst(f, ALL_TARGETS) in ("error", "silent"):
            serious.add((path.name, f.line))
    quiet = {(p.name, n) for p in paths for n in _marked(p, "quiet")}
    kept = {(p.name, n) for p in paths for n in _marked(p, "kept")}
    assert quiet and kept
    assert not serious & quiet, sorted(serious)
    assert kept <= serious, sorted(serious)


def test_parametrised_cuda_cases_of_a_self_skipping_test_are_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "pkg/tests/test_utils.py", '''
        import pytest
        import torch


        @pytest.mark.parametrize("device_from, device_to", [
            ("cpu", "cpu"),
            ("cpu", "cuda"),  # quiet
        ])
        def test_to_device(device_from, device_to):
            if "cuda" in (device_from, device_to) and not torch.cuda.is_available():
                pytest.skip()
            assert torch.ones(2).to(device_to).device.type == device_to


        def test_runs_everywhere():
            x = torch.ones(2).cuda()  # kept
            assert x.sum() == 2
    '''))


def test_a_test_module_skipped_as_a_whole_is_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "test/test_fp8_grouped_mm.py", '''
        import pytest
        import torch

        if not torch.cuda.is_available():
            pytest.skip("CUDA required", allow_module_level=True)


        def test_grouped_mm():
            a = torch.randn(4, 4, device="cuda")  # quiet
            assert a.shape == (4, 4)
    '''), _write(tmp_path, "test/test_split_handler.py", '''
        import torch


        def test_split():
            a = torch.randn(4, 4).to("cuda")  # kept
            assert a.shape == (4, 4)
    '''))


def test_cuda_visible_devices_plumbing_is_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "runner.py", '''
        import os
        import torch


        def launch(cmd, gpus):
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))  # quiet
            return cmd


        def train(model):
            return model.cuda()  # kept
    '''))


def test_an_error_caught_by_a_broad_except_is_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "__init__.py", '''
        import torch

        try:
            torch.cuda.set_device(0)  # quiet
        except Exception:
            pass

        torch.cuda.set_device(0)  # kept
    '''))


def test_code_built_on_tensorrt_or_gpudirect_storage_is_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "trt_compiler.py", '''
        import torch


        def run_engine(engine, inputs):
            import tensorrt as trt
            stream = torch.cuda.current_stream()  # quiet
            return engine.execute(inputs, stream, trt)


        def load(path):
            return torch.load(path, map_location="cuda")  # kept
    '''))


def test_an_opt_in_cuda_flag_that_defaults_off_is_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "scanvi_data.py", '''
        import torch


        def get_data(dataset="pbmc", cuda=False):
            x = torch.zeros(10, 3)
            if cuda:
                x = x.cuda()  # quiet
            return x


        def get_data_on_gpu(cuda=True):
            x = torch.zeros(10, 3)
            if cuda:
                x = x.cuda()  # kept
            return x
    '''))


def test_float64_made_without_a_device_is_info(tmp_path):
    _check(tmp_path, _write(tmp_path, "meta_tensor.py", '''
        import torch


        def get_default_affine():
            return torch.eye(4, dtype=torch.float64)  # quiet


        def normalize_transform(shape, device):
            return torch.ones(len(shape), dtype=torch.float64, device=device)  # kept
    '''))
