"""Round 12: false error/silent classes of judge 571903 (docs/precision/round12.md).  Each
test holds a false alarm quiet and a close true lock-in line at error/silent, so recall does
not drop.  The snippets are written for these tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def test_a_cuda_query_that_only_becomes_text_is_quiet_and_a_device_choice_kept(tmp_path):
    # a trainer that logs the GPU count and shows reserved memory in its progress bar
    _check(tmp_path, _write(tmp_path, "fit.py", '''
        import logging

        import torch

        logger = logging.getLogger(__name__)


        def environment_line():
            return f"torch={torch.__version__} cuda={torch.cuda.is_available()}"  # quiet


        def fit(model, batches, bar):
            logger.info("visible GPUs: %d", torch.cuda.device_count())  # quiet
            device = f"{'cuda' if torch.cuda.is_available() else 'cpu'}"  # kept
            model = model.to(device)
            for batch in batches:
                model(batch.to(device)).sum().backward()
                memory = f"{torch.cuda.memory_reserved() / 1e9 if torch.cuda.is_available() else 0:.2f}G"  # quiet
                bar.set_description(memory)
        '''))


def test_a_flag_read_only_for_a_progress_caption_is_quiet_and_a_flag_that_moves_data_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "loop.py", '''
        import torch


        class Loop:
            def __init__(self, options):
                self.show_memory = torch.cuda.is_available() and options["gpu"]  # quiet
                self.on_gpu = torch.cuda.is_available()  # kept

            def step(self, model, batch, bar, verbose):
                if self.on_gpu:
                    batch = batch.cuda()
                loss = model(batch).mean()
                if self.show_memory and verbose:
                    bar.set_postfix_str(f"memory {torch.cuda.memory_allocated()}")
                return loss
        '''))


def test_cuda_seeding_after_manual_seed_is_quiet_and_cuda_only_seeding_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "seeding.py", '''
        import random

        import torch


        def seed_everything(seed):
            random.seed(seed)
            if seed is not None:
                torch.manual_seed(seed)
                if torch.cuda.is_available():  # quiet
                    torch.cuda.manual_seed_all(seed)


        def seed_devices(seed):
            random.seed(seed)
            if torch.cuda.is_available():  # kept
                torch.cuda.manual_seed_all(seed)
        '''))


def test_a_device_count_that_only_shares_cpu_workers_is_quiet_and_one_that_splits_the_batch_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "loaders.py", '''
        import os

        import torch
        from torch.utils.data import DataLoader


        def make_loader(dataset, batch_size, workers=8):
            count = torch.cuda.device_count()  # quiet
            nw = min([os.cpu_count() // max(count, 1), batch_size if batch_size > 1 else 0, workers])
            return DataLoader(dataset, batch_size=batch_size, num_workers=nw)


        def split_batch(batch):
            count = torch.cuda.device_count()  # kept
            return batch.chunk(count)
        '''))


def test_lines_after_a_cuda_assert_are_quiet_and_the_same_lines_without_it_kept(tmp_path):
    # a DDP entry point that asserts enough CUDA devices before choosing one
    _check(tmp_path, _write(tmp_path, "train.py", '''
        import os

        import torch
        import torch.distributed as dist

        LOCAL_RANK = int(os.getenv("LOCAL_RANK", -1))


        def setup(opt):
            device = torch.device("cpu")
            if LOCAL_RANK != -1:
                assert opt.batch_size > 0, "pass a batch size"
                assert torch.cuda.device_count() > LOCAL_RANK, "not enough CUDA devices"  # kept
                torch.cuda.set_device(LOCAL_RANK)  # quiet
                device = torch.device("cuda", LOCAL_RANK)  # quiet
                dist.init_process_group(backend="gloo")
            return device


        def setup_unchecked(opt):
            device = torch.device("cpu")
            if LOCAL_RANK != -1:
                torch.cuda.set_device(LOCAL_RANK)  # kept
                device = torch.device("cuda", LOCAL_RANK)  # kept
                assert torch.cuda.device_count() > LOCAL_RANK, "not enough CUDA devices"
            return device
        '''))


def test_a_cuda_tensor_type_named_in_a_type_or_compared_is_quiet_and_one_constructed_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "boxes.py", '''
        from typing import Union

        import torch

        Index = Union[slice, int, torch.LongTensor,
                      torch.cuda.LongTensor, torch.BoolTensor]  # quiet


        def to_half(parameter):
            if parameter.dtype != torch.cuda.HalfTensor:  # quiet
                parameter = parameter.half()
            return parameter


        def flags(count):
            return torch.cuda.BoolTensor(count).fill_(True)  # kept
        '''))


def test_a_method_default_every_caller_in_the_package_overrides_is_quiet_and_one_used_kept(tmp_path):
    # a prior generator whose methods are called from heads in other files of the package
    generator = _write(tmp_path, "pkg/priors.py", '''
        import torch


        class PointGrid:
            def valid_flags(self, sizes, device="cuda"):  # quiet
                return [torch.ones(s, dtype=torch.bool, device=device) for s in sizes]

            def grid(self, size, device="cuda"):  # kept
                return torch.zeros(size, 2, device=device)

            def forward(self, x, device="cuda"):  # kept
                return x.to(device)

            def setup(self, rank, backend="nccl"):  # kept
                torch.distributed.init_process_group(backend=backend, rank=rank)
        ''')
    head = _write(tmp_path, "pkg/head.py", '''
        from pkg.priors import PointGrid


        class Head:
            def __init__(self):
                self.priors = PointGrid()

            def start(self, rank, options):
                self.priors.setup(rank, **options)

            def targets(self, features, sizes):
                flags = self.priors.valid_flags(sizes, device=features.device)
                points = self.priors.grid(len(sizes))
                moved = self.priors.forward(features, device=features.device)
                return flags, points, moved
        ''')
    _check(tmp_path, generator, head)
