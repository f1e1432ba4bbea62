"""Round 13: false error/silent classes of judge 517293 (docs/precision/round13.md).  Each
test holds a false alarm quiet and a close true lock-in line at error/silent, so recall does
not drop.  The snippets are written for these tests, shaped like the judged code."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def test_a_class_flag_off_by_default_is_quiet_and_one_on_by_default_kept(tmp_path):
    # a speech front end: the user asks for the GPU with gpu=True; a sibling class turns it on itself
    _check(tmp_path, _write(tmp_path, "speech.py", '''
        import torch


        class Speaker:
            def __init__(self, checkpoint, gpu: bool = False):
                self.gpu = gpu
                self.net = self._restore(checkpoint, gpu=gpu)

            def _restore(self, checkpoint, *, gpu: bool):
                net = torch.load(checkpoint)
                if gpu:
                    net.cuda()  # quiet
                return net

            def embed(self, wave):
                if self.gpu:
                    wave = wave.cuda()  # quiet
                return self.net(wave)


        class Vocoder:
            def __init__(self, net, use_cuda: bool = True):
                self.use_cuda = use_cuda
                self.net = net

            def decode(self, mel):
                if self.use_cuda:
                    mel = mel.cuda()  # kept
                return self.net(mel)


        class Aligner:
            def __init__(self, net, gpu=None):
                self.net = net
                self.gpu = gpu

            def run(self, batch, *, gpu):
                gpu = torch.cuda.is_available() if gpu is None else gpu
                if gpu:
                    batch = batch.cuda()  # kept
                return self.net(batch)
        '''))


def test_a_command_line_flag_off_by_default_is_quiet_and_one_on_by_default_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "align.py", '''
        import argparse

        import torch


        def align(model, batches, *, use_cuda: bool = True):
            if use_cuda:
                model.cuda()  # quiet
            for text, mel in batches:
                if use_cuda:
                    text = text.cuda()  # quiet
                model(text, mel)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--use_cuda", action="store_true", help="run on the GPU")
            parser.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=True)
            args = parser.parse_args()
            model = torch.load("model.pt")
            if args.use_cuda:
                model.cuda()  # quiet
            align(model, [], use_cuda=args.use_cuda)
            if args.gpu:
                model.cuda()  # kept
        '''))


def test_a_class_whose_constructor_asserts_cuda_is_quiet_and_a_class_without_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "bench.py", '''
        import torch


        class GpuBenchmark:
            def __init__(self, steps: int, device: torch.device = torch.device("cuda")):  # quiet
                self.steps = steps
                assert torch.cuda.is_available(), "only meaningful on a GPU"
                self.device = device

            def summary(self):
                return {"gpu": torch.cuda.get_device_name()}  # quiet


        class Report:
            def __init__(self, steps: int):
                self.steps = steps

            def summary(self):
                return {"gpu": torch.cuda.get_device_name()}  # kept
        '''))


def test_a_function_used_only_after_a_cuda_assert_is_quiet_and_one_used_freely_kept(tmp_path):
    # a launcher that asserts CUDA before it spawns one process per GPU
    _check(tmp_path, _write(tmp_path, "launch.py", '''
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp


        def _join_group(rank, world):
            dist.init_process_group("nccl", rank=rank, world_size=world)  # quiet


        def _worker(rank, world):
            _join_group(rank, world)
            torch.cuda.set_device(rank)  # quiet


        def _pin(rank):
            torch.cuda.set_device(rank)  # kept


        def launch(device: torch.device, processes: int):
            if processes > 1:
                assert device.type == "cuda", "several processes need CUDA"
                mp.spawn(_worker, args=(processes,), nprocs=processes)
            else:
                _pin(0)
        '''))


def test_a_check_guarding_only_cuda_tuning_is_quiet_and_a_timing_sync_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "tuning.py", '''
        import time

        import torch
        import torch.multiprocessing as mp

        if torch.cuda.is_available():  # quiet
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True

        if torch.cuda.is_available():  # quiet
            mp.set_start_method("spawn", force=True)


        def release():
            if torch.cuda.is_available():  # quiet
                torch.cuda.empty_cache()
                torch.cuda.synchronize()


        def run(model, images):
            if torch.cuda.is_available():  # kept
                torch.cuda.synchronize()
            started = time.time()
            model(images)
            return time.time() - started
        '''))


def test_a_device_count_stored_only_for_printing_is_quiet_and_one_that_divides_kept(tmp_path):
    _check(tmp_path, _write(tmp_path, "setup_run.py", '''
        import torch

        gpus = torch.cuda.device_count()  # quiet
        print(" > GPUs:", gpus)


        def configure(**options):
            return dict(options, gpus=1)


        def per_device(batch_size):
            devices = torch.cuda.device_count()  # kept
            return batch_size // devices
        '''))
