"""Round 18b: a CUDA availability check (TP003) that decides no device.  A check that is the value
of ``pin_memory=``, one that only waits for CUDA work where nothing around it reads a clock, and one
that only picks the ``map_location`` of a checkpoint copied into a model by ``load_state_dict`` are
info; the judged-correct neighbours (a sync inside a timing, a map_location whose checkpoint is
returned or used as tensors, a device the work runs on) stay silent.  The snippets are written for
these tests, shaped like the judged code (docs/precision/round18b.md)."""
from __future__ import annotations

from pathlib import Path

from scan_marks import ALL_TARGETS
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import CUDA_AVAILABILITY_CHECK, finding_worst
from torchport.scan.scanner import scan


def _checks(root: Path) -> dict[int, tuple[str | None, str]]:
    """line -> (worst severity over every target, the reason given) of each TP003 finding."""
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    return {f.line: (finding_worst(f, ALL_TARGETS), f.cap_reason or "")
            for f in result.findings if f.rule_id == CUDA_AVAILABILITY_CHECK}


def test_pinned_buffer_keyword_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "gptq.py", '''
        import torch


        class Buffer:
            def __init__(self, groups, columns, device):
                self.b = torch.zeros((groups, columns),
                                     pin_memory=torch.cuda.is_available(),
                                     device=device)
    ''')
    severity, reason = _checks(tmp_path)[7]
    assert severity == "info"
    assert "pin_memory=" in reason


def test_device_keyword_beside_it_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "gptq.py", '''
        import torch


        def buffer(groups, columns):
            return torch.zeros((groups, columns),
                               device="cuda" if torch.cuda.is_available() else "cpu")
    ''')
    assert _checks(tmp_path)[6][0] == "silent"


def test_sync_before_a_log_line_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "server.py", '''
        import logging

        import torch

        logger = logging.getLogger(__name__)


        class Server:
            def precompile(self, sizes):
                for size in sizes:
                    self.model(torch.zeros(size))
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                logger.info("Precompilation complete.")
    ''')
    severity, reason = _checks(tmp_path)[12]
    assert severity == "info"
    assert "reads a clock" in reason


def test_sync_inside_a_timing_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "profile.py", '''
        import time

        import torch


        class Timer:
            def __enter__(self):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                self.start = time.perf_counter()
                return self

            def __exit__(self, *exc):
                self.duration = time.perf_counter() - self.start
    ''')
    assert _checks(tmp_path)[8][0] == "silent"


def test_sync_in_a_function_named_for_timing_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "bench.py", '''
        import torch


        def benchmark(fn, record):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            record(fn())
    ''')
    assert _checks(tmp_path)[5][0] == "silent"


def test_map_location_of_a_copied_state_dict_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "resnet.py", '''
        import torch


        def fetch(depth, device="cpu"):
            checkpoint = torch.load(f"resnet{depth}.pth", map_location=torch.device(device))
            return checkpoint.get("state_dict")


        def build(model, pretrained, depth):
            if pretrained:
                device = "cuda" if torch.cuda.is_available() else "cpu"
                if isinstance(pretrained, str):
                    state = torch.load(pretrained, map_location=device)
                else:
                    state = fetch(depth, device=device)
                state = {k.replace("module.", ""): v for k, v in state.items()}
                model.load_state_dict(state, strict=True)
            return model
    ''')
    severity, reason = _checks(tmp_path)[11]
    assert severity == "info"
    assert "map_location" in reason and "line 17" in reason


def test_map_location_of_a_returned_checkpoint_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "load.py", '''
        import torch


        def load(model, path):
            device = "cuda" if torch.cuda.is_available() else "cpu"
            state = torch.load(path, map_location=device)
            model.load_state_dict(state["model"])
            return state
    ''')
    assert _checks(tmp_path)[5][0] == "silent"


def test_map_location_of_tensors_used_for_work_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "embed.py", '''
        import torch


        def embed(model, weights, table):
            device = "cuda" if torch.cuda.is_available() else "cpu"
            model.load_state_dict(torch.load(weights, map_location=device))
            vectors = torch.load(table, map_location=device)
            return vectors @ vectors.T
    ''')
    assert _checks(tmp_path)[5][0] == "silent"


def test_device_the_model_moves_to_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "build.py", '''
        import torch


        def build(model, path):
            device = "cuda" if torch.cuda.is_available() else "cpu"
            model.load_state_dict(torch.load(path, map_location=device))
            return model.to(device)
    ''')
    assert _checks(tmp_path)[5][0] == "silent"


def test_sync_that_ends_its_function_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "trainer.py", '''
        import torch


        class Trainer:
            def step(self, batch):
                self.model(batch).sum().backward()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
    ''')
    assert _checks(tmp_path)[7][0] == "silent"


_ATTEND = '''
    from collections import namedtuple

    import torch
    import torch.nn.functional as F

    Config = namedtuple("Config", ["enable_flash", "enable_math", "enable_mem_efficient"])


    class Attend(torch.nn.Module):
        def __init__(self, flash=False):
            super().__init__()
            self.cpu_config = Config(True, True, True)
            self.cuda_config = None
            if not torch.cuda.is_available() or not flash:
                return
            properties = torch.cuda.get_device_properties(torch.device("cuda"))
            if properties.major == 8:
                print("A100 GPU detected, using flash attention")
                self.cuda_config = Config(True, False, False)
            else:
                self.cuda_config = Config(False, True, True)

        def forward(self, q, k, v):
            _, heads, q_len, _, k_len, is_cuda = *q.shape, k.shape[-2], q.is_cuda
            config = CHOICE
            with torch.backends.cuda.sdp_kernel(**config._asdict()):
                return F.scaled_dot_product_attention(q, k, v)
'''


def test_attention_config_for_cuda_tensors_is_info(tmp_path: Path) -> None:
    _write(tmp_path, "attend.py", _ATTEND.replace("CHOICE", "self.cuda_config if is_cuda else self.cpu_config"))
    severity, reason = _checks(tmp_path)[14]
    assert severity == "info"
    assert "self.cuda_config" in reason


def test_attention_config_read_for_any_tensor_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "attend.py", _ATTEND.replace("CHOICE", "self.cuda_config or self.cpu_config"))
    assert _checks(tmp_path)[14][0] == "silent"


_BATCH_SIZE = '''
    import torch


    def pick_batch_size():
        DEFAULT
        if torch.cuda.is_available():
            _, available = torch.cuda.mem_get_info()
            batch_size = 1
            if available / 1024**3 > 14:
                batch_size = 16
        return batch_size
'''


def test_name_bound_only_with_cuda_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "tortoise.py", _BATCH_SIZE.replace("DEFAULT", "pass"))
    severity, reason = _checks(tmp_path)[6]
    assert severity == "error"
    assert "UnboundLocalError" in reason and "line 11" in reason


def test_name_with_a_default_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "tortoise.py", _BATCH_SIZE.replace("DEFAULT", "batch_size = 1"))
    assert _checks(tmp_path)[6][0] == "silent"


def test_sync_before_a_collective_stays_silent(tmp_path: Path) -> None:
    _write(tmp_path, "oss.py", '''
        import torch
        import torch.distributed as dist


        def exchange(buckets, device):
            for bucket in buckets:
                bucket.to(dtype=torch.float16, device=device, non_blocking=True)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            for bucket in buckets:
                dist.broadcast(bucket, src=0)
    ''')
    assert _checks(tmp_path)[8][0] == "silent"
