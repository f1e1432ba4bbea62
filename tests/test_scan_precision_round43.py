"""Round 43 (docs/precision/round43.md): shapes both judges of seed 830311 found incorrect at
error or silent, each beside the close shape where the finding stands.  Kilosort's CUDA memory
readings kept under ``if torch.cuda.is_available():`` and its CUDA seeding followed by
``torch.random.manual_seed``; suite2p's ``event.double()`` in click handlers not named
``*Event`` and its float64 in the branch of ``if device.type == "mps":`` that MPS does not take;
earth2studio's CuPy hand-over for CUDA tensors and its ``if x.is_cuda and False:``; msclap's
``self.use_cuda and torch.cuda.is_available()``, the opt-in flag beside the check; kilosort's list
of CUDA device names read only as ``gpus + ["cpu"]``."""
from __future__ import annotations

from pathlib import Path

import torch

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_BOOKKEEPING = '''
    import torch


    def detect_spikes(ops, device):
        st0 = torch.zeros(3, device=device)
        if torch.cuda.is_available():  # quiet
            ops["cuda_st0"] = torch.cuda.memory_stats(device)
        if torch.cuda.is_available():  # quiet
            ops["reserved"] = torch.cuda.memory_reserved()
            ops["peak"] = torch.cuda.max_memory_allocated()
        return st0


    def benchmark_step(model, x):
        model(x)
        if torch.cuda.is_available():  # kept
            peak = torch.cuda.max_memory_allocated()
        return peak


    def cluster(ops, model):
        if torch.cuda.is_available():  # kept
            ops["cuda_clu"] = torch.cuda.memory_stats()
            model = model.cuda()
        return model


    def seed_everything():
        torch.cuda.manual_seed_all(1)  # quiet
        torch.random.manual_seed(1)


    def seed_cuda_only(seed):
        torch.cuda.manual_seed_all(seed)  # kept
        return seed
'''

_GUI = '''
    import torch


    class Viewer:
        def plot_clicked(self, event):
            if event.button() == 1:
                if event.double():  # quiet
                    self.zoom()

        def on_press(self, ev):
            ev.accept()
            return ev.double()  # quiet

        def smooth(self, frames):
            frames = frames.to(self.device)
            return frames.double().mean()  # kept
'''

_MPS_BRANCH = '''
    import torch


    def recenter(ymax, device):
        ymax = ymax.to(device)
        if device.type == "mps":
            dy = ymax.to(torch.float32).mean()
        else:
            dy = ymax.double().mean()  # quiet
        if device.type != "mps":
            dx = ymax.double().sum()  # quiet
        else:
            dx = ymax.sum()
        return dy + dx + ymax.double().max()  # kept
'''

_CUPY = '''
    import torch

    try:
        import cupy as cp
    except ImportError:
        cp = None


    def to_output(out, device):
        if device.type == "cuda" and cp is not None:  # quiet
            data = cp.asarray(out.detach())
        else:
            data = out.detach().cpu().numpy()
        return data


    def tracked(tree, frame):
        if tree.is_cuda and False:  # quiet
            pass
        else:
            return frame


    def place(x, device):
        if device.type == "cuda":  # kept
            x = x.cuda()
        else:
            x = x.cpu()
        return x
'''

_OPT_IN = '''
    import torch


    class Wrapper:
        def __init__(self, path, use_cuda=False):
            self.use_cuda = use_cuda
            self.model = torch.load(path, weights_only=False)
            if self.use_cuda and torch.cuda.is_available():  # quiet
                self.model = self.model.cuda()

        def embed(self, audio):
            audio = audio.reshape(
                1, -1).cuda() if self.use_cuda and torch.cuda.is_available() else audio.reshape(1, -1)  # quiet
            return self.model(audio)


    class Eager:
        def __init__(self, path, use_cuda=True):
            self.use_cuda = use_cuda
            self.model = torch.load(path, weights_only=False)
            if self.use_cuda and torch.cuda.is_available():  # kept
                self.model = self.model.cuda()
'''

_DEVICE_NAMES = '''
    import torch


    class SettingsBox:
        def fill(self):
            gpus = [
                torch.cuda.get_device_name(i)  # quiet
                for i in range(torch.cuda.device_count())
            ]
            self.selector.addItems(gpus + ["cpu"])

        def first(self):
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]  # kept
            return names[0]
'''


def test_cuda_bookkeeping_and_redundant_seeding_are_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "run_sorter.py", _BOOKKEEPING)
    check_marked_lines([path], (path,))


def test_a_qt_event_double_click_test_is_not_tensor_double(tmp_path: Path) -> None:
    path = _write(tmp_path, "viewer.py", _GUI)
    check_marked_lines([path], (path,))


def test_float64_in_the_branch_mps_does_not_take_is_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "register.py", _MPS_BRANCH)
    check_marked_lines([path], (path,))


def test_a_cuda_library_branch_and_a_switched_off_branch_are_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "interp.py", _CUPY)
    check_marked_lines([path], (path,))


def test_an_opt_in_flag_beside_the_check_makes_it_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "clap.py", _OPT_IN)
    check_marked_lines([path], (path,))


def test_device_names_read_only_where_empty_is_fine_are_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "settings_box.py", _DEVICE_NAMES)
    check_marked_lines([path], (path,))


def test_what_the_readings_rest_on_without_cuda() -> None:
    # torch.manual_seed (torch.random.manual_seed) seeds every device's generator, so a CUDA
    # seeding just before it is redundant; an empty list of names concatenates and counts fine
    if not torch.cuda.is_available():
        assert torch.cuda.device_count() == 0
        assert [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] + ["cpu"] == ["cpu"]
    torch.cuda.manual_seed_all(3)
    torch.random.manual_seed(1)
    first = torch.rand(2)
    torch.random.manual_seed(1)
    assert torch.equal(first, torch.rand(2))
