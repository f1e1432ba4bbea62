"""Precision on the false-alarm classes left after round 5 of the seed-234663 verdicts
(docs/precision/judge-234663-verdicts.md, docs/precision/round6.md): syncs around a
timing that only picks a kernel, "cuda" defaults that callers in other files override,
select_device-style helpers, float64 where no MPS tensor is made, other inference
runtimes' providers in export code, and the non-gloo branch of a distributed set-up.
Each snippet is our own, shaped like the real code; each test keeps a close true
lock-in line found, so recall does not drop."""
from __future__ import annotations

from pathlib import Path

from scan_marks import ALL_TARGETS, check_marked_lines
from scan_marks import write_snippet as _write

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan


def _check(*paths: Path) -> None:
    check_marked_lines(list(paths), paths)


def test_sync_around_a_kernel_choice_timing_is_performance(tmp_path):
    _check(_write(tmp_path, "linear.py", '''
        import time
        import torch


        class HeteroLinear(torch.nn.Module):
            def _update_timing_cache(self, x, key):
                if torch.cuda.is_available():  # quiet
                    torch.cuda.synchronize()
                t = time.perf_counter()
                self.forward_segmm(x)
                if torch.cuda.is_available():  # quiet
                    torch.cuda.synchronize()
                self._timing_cache[key] = time.perf_counter() - t


        def benchmark(funcs, args):
            # a public timing utility: its times are unsynchronised on other accelerators
            if torch.cuda.is_available():  # kept
                torch.cuda.synchronize()
            t = time.perf_counter()
            funcs(*args)
            return time.perf_counter() - t
    '''))


def test_default_that_callers_in_other_files_override_is_default_only(tmp_path):
    precision = _write(tmp_path, "train/precision.py", '''
        from functools import partial

        import torch


        def get_autocast(precision, device_type="cuda"):  # quiet
            return partial(torch.amp.autocast, device_type=device_type, dtype=torch.float16)


        def get_loader_device(device="cuda"):  # kept
            return torch.device(device)
    ''')
    train = _write(tmp_path, "train/train.py", '''
        from train.precision import get_autocast, get_loader_device


        def train_one_epoch(model, args, device):
            autocast = get_autocast(args.precision, device_type=device.type)
            loader_device = get_loader_device()  # uses the "cuda" default
            return autocast, loader_device


        def evaluate(model, args, device):
            return get_autocast(args.precision, device.type)
    ''')
    _check(precision, train)


def test_cuda_index_queries_in_a_device_selection_helper_are_info(tmp_path):
    _check(_write(tmp_path, "torch_utils.py", '''
        import os
        import torch


        def parse_device(device=""):
            device = str(device).lower().replace("cuda:", "")
            for backend in ("npu", "xpu"):
                if device.startswith(backend):
                    return device
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")  # quiet
            visible = visible.split(",")[: torch.cuda.device_count()]  # quiet
            return device if visible else ""


        def select_device(device=""):
            device = parse_device(device)
            cpu, mps = device == "cpu", device == "mps"
            if not cpu and not mps and device:
                valid = all(x.isdigit() and int(x) < torch.cuda.device_count() for x in device.split(","))  # quiet
                if not valid:
                    raise ValueError(f"Invalid CUDA device={device} requested")
            fallback = "cuda" if torch.cuda.device_count() else "cpu"  # kept
            return torch.device(device or fallback)


        def get_world_size():
            return torch.cuda.device_count()  # kept
    '''))


def test_float64_where_no_mps_tensor_is_made(tmp_path):
    _check(_write(tmp_path, "val.py", '''
        import numpy as np
        import torch
        import torch.distributed as dist

        RANK = -1

        _ORT_DTYPES = {
            "tensor(float)": (torch.float32, np.float32),
            "tensor(double)": (torch.float64, np.float64),  # quiet
        }


        def to_doubleTensor(x):
            if isinstance(x, np.ndarray):
                return torch.from_numpy(x).double()  # quiet
            return torch.tensor(x, dtype=torch.double)  # quiet


        class DepthValidator:
            def gather_stats(self):
                if RANK == -1 or not dist.is_initialized():
                    return
                count = torch.tensor([self.count], dtype=torch.float64, device=self.device)  # quiet
                dist.all_reduce(count)

            def mean_average_precision(self, hits):
                return hits.to(self.device, torch.float64).mean()  # kept
    '''))


def test_other_runtime_providers_and_tensorrt_branches_in_export_code(tmp_path):
    _check(_write(tmp_path, "backends.py", '''
        import torch


        class ONNXBackend:
            def load_model(self, weight):
                cuda = torch.cuda.is_available() and self.device.type != "cpu"  # quiet
                import onnxruntime

                providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
                self.session = onnxruntime.InferenceSession(weight, providers=providers)


        class Exporter:
            def export_head(self, head, fmt):
                if fmt == "engine":
                    cuda_major = (torch.version.cuda or "12").split(".")[0]  # quiet
                    head.bake = check_version(f"tensorrt-cu{cuda_major}", ">=10.0.0")


        class TorchBackend:
            def load_model(self, weight):
                # cuda-or-cpu for a torch model: silently the CPU on other accelerators
                cuda = torch.cuda.is_available() and self.device.type != "cpu"  # kept
                self.model = torch.load(weight, map_location="cuda" if cuda else "cpu")
    '''))


def test_device_ids_in_the_non_gloo_branch_are_info(tmp_path):
    _check(_write(tmp_path, "core.py", '''
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP


        def wrap(module, backend, device, local_rank):
            if backend == "gloo":
                module = DDP(module, device_ids=None)
            else:
                module = DDP(module, device_ids=[device])  # quiet
            if not backend == "gloo":
                if local_rank + 1 > torch.cuda.device_count():  # quiet
                    raise ValueError("Not enough GPUs available!")
            return module


        def wrap_always(module, device):
            return DDP(module, device_ids=[device])  # kept
    '''))


def test_mem_get_info_is_an_error_not_a_silent_statistic(tmp_path):
    path = _write(tmp_path, "llm.py", '''
        import torch


        def get_llm_kwargs(n_gpus):
            free, total = torch.cuda.mem_get_info(0)
            used = torch.cuda.memory_allocated(0)
            return {"max_memory": {0: total - used}}
    ''')
    result = scan([path], ScanConfig(), jobs=1)
    worst = {(f.line, f.rule_id): finding_worst(f, ALL_TARGETS) for f in result.findings}
    # mem_get_info raises where CUDA is absent; memory_allocated reads 0 there
    assert worst == {(5, "TP111"): "error", (6, "TP104"): "silent"}
