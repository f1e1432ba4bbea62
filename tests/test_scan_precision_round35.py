"""Checks whose outcome decides nothing on another accelerator.  Shapes from the verdicts of judge
44 (seed 811980): mmedit's demos build ``torch.device('cuda', args.device)`` in the ``else`` of
``if args.device < 0 or not torch.cuda.is_available():``; mmflow's ``if not
torch.cuda.is_available(): assert mmcv >= 1.4.4``.  Each judged incorrect at error or silent; the
third shape, autonomous-learning-library's ``*_test.py`` checks, is in test_scan_precision_round33.py."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

_DEMO = """
    import argparse

    import torch


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument('--device', type=int, default=0, help='CUDA device id')
        args = parser.parse_args()
        if args.device < 0 or not torch.cuda.is_available():  # kept
            device = torch.device('cpu')
        else:
            device = torch.device('cuda', args.device)  # quiet
        return device


    def pick(index):
        return torch.device('cpu') if not torch.cuda.is_available() else torch.device('cuda', index)  # kept


    def move(x, index):
        return (x if not torch.cuda.is_available()  # kept
                else x.cuda(index))  # quiet


    def one_gpu_or_none(x):
        if torch.cuda.device_count() == 1 or not torch.cuda.is_available():  # kept
            return x
        else:
            return x.cuda(1)  # quiet


    def adapt(x):
        if x.device.type != "cuda":
            return x * 2
        elif x.dim() > 2:
            return x.cuda(0)  # quiet
        else:
            return x


    def either(x, use_cpu):
        # false for `use_cpu and ...`: no promise of CUDA in the else branch
        if use_cpu and not torch.cuda.is_available():
            return x
        else:
            return x.cuda()  # kept
"""

_TRAIN = """
    import mmcv
    import torch
    from mmcv.parallel import MMDataParallel


    def train_model(model, cfg):
        if not torch.cuda.is_available():  # quiet
            assert mmcv.__version__ >= '1.4.4', 'Please use MMCV >= 1.4.4 for CPU training!'
        model = MMDataParallel(model, device_ids=cfg.gpu_ids)
        if not torch.cuda.is_available():  # kept
            cfg.lr = cfg.lr / 8
        return model


    def place(model):
        if not torch.cuda.is_available():  # kept
            assert model is not None
        else:
            model = model.half()
        return model


    def refuse(model):
        # a refusal, not a requirement: the code after it still says what fails
        if not torch.cuda.is_available():
            assert False, "CUDA is required"
        return model.cuda()  # kept
"""

# Not a test: a function that ends in a CUDA check still chooses where work runs.
_LIBRARY = """
    import torch


    def warm_up(model):
        model.eval()
        if torch.cuda.is_available():  # kept
            model.half()
"""


def test_checks_that_decide_nothing_elsewhere(tmp_path: Path) -> None:
    paths = (
        _write(tmp_path, "demo/generation_demo.py", _DEMO),
        _write(tmp_path, "apis/train.py", _TRAIN),
        _write(tmp_path, "lib/warmup.py", _LIBRARY),
    )
    check_marked_lines([tmp_path], paths)
    found = worst_by_line(tmp_path)
    assert "inside a CUDA check" in found[("generation_demo.py", 13, "TP001")][1]
    assert "assertion" in found[("train.py", 7, "TP003")][1]
