"""Precision on shapes the independent judge of issue 25 found reported too severely
(tests skipped without CUDA, feature gates, defaults every caller overrides, guards
written as ``startswith``, one condition reported twice) and misses (device strings
in tuples, lists and constructor arguments).  Real files through the real scanner,
whose fast path parses only the statements with trigger words."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan

ALL_TARGETS = ScanConfig().targets


def _scan(tmp_path: Path, source: str, name: str = "test_kernels.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    result = scan([path], ScanConfig())
    assert not result.skipped, result.skipped
    return result.findings


def _worst_by_line(findings) -> dict[int, set[str | None]]:
    by_line: dict[int, set[str | None]] = {}
    for finding in findings:
        by_line.setdefault(finding.line, set()).add(finding_worst(finding, ALL_TARGETS))
    return by_line


TEST_MODULE = '''
import unittest

import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only")
def test_fused_adam_matches_reference():
    model = torch.nn.Linear(8, 8).cuda()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() > 0


@requires_cuda
def test_amp_step():
    with torch.cuda.amp.autocast():
        torch.ones(2, device="cuda").sum()


@unittest.skipUnless(torch.cuda.device_count() >= 2, "needs two GPUs")
class TestMultiGPU(unittest.TestCase):
    def test_copy(self):
        x = torch.ones(2, device="cuda:1")
        self.assertEqual(x.device.index, 1)


def test_flash_attention():
    flash_attn = pytest.importorskip("flash_attn")
    q = torch.randn(2, 4, 8, 16, dtype=torch.float16).cuda()
    assert flash_attn.flash_attn_func(q, q, q).shape == q.shape


def test_half_precision():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    torch.cuda.synchronize()


def test_runs_everywhere():
    x = torch.ones(2).cuda()
    assert x.sum() == 2
'''


def test_test_bodies_skipped_without_cuda_are_info(tmp_path):
    findings = _scan(tmp_path, TEST_MODULE)
    worst = _worst_by_line(findings)
    unguarded = {line for line, severities in worst.items() if severities - {"info"}}
    assert unguarded == {42}  # test_runs_everywhere's .cuda(), and only it
    assert set(worst) == {6, 9, 11, 12, 13, 18, 19, 22, 25, 31, 36, 38, 42}
    reasons = {f.line: f.cap_reason for f in findings}
    assert {reasons[line] for line in (11, 12, 13, 18, 19, 25, 31)} == {"inside a test skipped where CUDA is absent"}
    assert {reasons[line] for line in (6, 9, 22, 36)} == {"only decides whether a test is skipped"}
    assert reasons[38] == "inside a CUDA check: runs only where CUDA is present"


def test_a_module_marked_multi_gpu_is_info(tmp_path):
    findings = _scan(tmp_path, '''
        import pytest
        import torch

        pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")


        def test_peer_copy():
            torch.cuda.set_device(1)
            assert torch.ones(1, device="cuda:0").to("cuda:1").device.index == 1
        ''')
    assert findings and all(finding_worst(f, ALL_TARGETS) == "info" for f in findings)


def test_feature_gates_and_lists_of_accelerators_are_info(tmp_path):
    findings = _scan(tmp_path, '''
        import inspect

        import torch
        from torch import nn


        def configure_optimizer(params, device_type, lr):
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
            use_fused = fused_available and device_type == "cuda"
            return torch.optim.AdamW(params, lr=lr, fused=use_fused)


        def forward(module, input, ngpu):
            if (input.is_cuda or input.is_xpu) and ngpu > 1:
                return nn.parallel.data_parallel(module, input, range(ngpu))
            return module(input)


        def barrier(device):
            if str(device).startswith("cuda:"):
                torch.cuda.synchronize(device)


        def pick(args):
            use_cuda = args.use_cuda and torch.cuda.is_available()
            return torch.device("cuda" if use_cuda else "cpu")
        ''', name="train.py")
    worst = _worst_by_line(findings)
    assert worst[9] == {"info"} and worst[14] == {"info"}
    assert worst[21] == {"info"}  # synchronize under a startswith("cuda") guard
    # an availability query picks the CPU over any other accelerator: still reported
    assert worst[25] == {"silent"}


def test_one_finding_per_condition(tmp_path):
    findings = _scan(tmp_path, '''
        import torch


        def maybe_sync(tensor):
            if tensor.is_cuda and torch.cuda.is_available():
                torch.cuda.synchronize()
        ''', name="train.py")
    checks = [f for f in findings if f.rule_id == "TP003"]
    assert len(checks) == 1
    assert checks[0].detail == ".is_cuda" and checks[0].line == 5
    assert [r.message for r in checks[0].related] == ["same condition: torch.cuda.is_available()"]


def test_defaults_every_call_overrides_are_default_only(tmp_path):
    findings = _scan(tmp_path, '''
        import argparse

        import torch


        class Evaluator:
            def __init__(self, model, device="cuda"):
                self.model = model.to(device)


        def evaluate(model, batches, device="cuda"):
            return [model(b.to(device)) for b in batches]


        def export(model, path, device="cuda"):
            torch.save(model.to(device).state_dict(), path)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cpu")
            args = parser.parse_args()
            model = torch.nn.Linear(2, 2)
            Evaluator(model, torch.device(args.device))
            evaluate(model, [torch.ones(2)], device=args.device)
            export(model, "m.pt", args.device)
            export(model, "m2.pt")
        ''', name="train.py")
    defaults = {f.line: f for f in findings if f.rule_id == "TP001"}
    assert finding_worst(defaults[7], ALL_TARGETS) == "info"
    assert defaults[7].cap_reason == "default only: every call in this file passes device"
    assert finding_worst(defaults[11], ALL_TARGETS) == "info"
    assert finding_worst(defaults[15], ALL_TARGETS) == "error"  # export(model, "m2.pt") uses it


def test_device_strings_in_tuples_lists_and_constructor_arguments(tmp_path):
    findings = _scan(tmp_path, '''
        import torch
        import torch.distributed.rpc as rpc


        class ParameterServer:
            def __init__(self, device, lr=0.01):
                self.device = torch.device(device)


        class Trainer:
            def __init__(self, model, device):
                self.model = model.to(device)


        def start(extra):
            server = rpc.remote("ps", ParameterServer, args=("cuda:0",) + extra)
            devices = ["cuda:0", "cuda:1"]
            trainer = Trainer(torch.nn.Linear(2, 2), "cuda")
            choices = ["cpu", "cuda"]
            name_and_count = ("cuda", 2)
            supported = {"nccl": ["cuda"], "gloo": ["cpu", "cuda"]}
            return server, devices, trainer, choices, name_and_count, supported
        ''', name="train.py")
    found = sorted((f.line, f.column, f.detail) for f in findings if f.rule_id == "TP001")
    # a list may name the device to use or the kinds something supports: reported, not rewritten
    assert all(f.fix is None for f in findings if " in a " in f.detail)
    assert found == [(16, 54, '"cuda:0" in a tuple'), (17, 16, '"cuda:0" in a list'),
                     (17, 26, '"cuda:1" in a list'), (18, 46, '"cuda" as device of Trainer()')]
