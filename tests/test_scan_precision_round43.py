"""Round 43 (docs/precision/round43.md): shapes both judges of seed 830311 found incorrect at
error or silent, each beside the close shape where the finding stands.  Kilosort's CUDA memory
readings kept under ``if torch.cuda.is_available():`` and its CUDA seeding followed by
``torch.random.manual_seed``; suite2p's ``event.double()`` in click handlers not named
``*Event`` and its float64 in the branch of ``if device.type == "mps":`` that MPS does not take;
earth2studio's CuPy hand-over for CUDA tensors and its ``if x.is_cuda and False:``; msclap's
``self.use_cuda and torch.cuda.is_available()``, the opt-in flag beside the check; kilosort's list
of CUDA device names read only as ``gpus + ["cpu"]``.  From seed 150301: thinc's tests skipped by
``not has_torch_cuda_gpu`` (a flag from another module) with the reason "needs a GPU"; gcastle's
checks that only log or refuse ``device_type="gpu"``, and its ``torch.device("cuda")`` past that
refusal; neuralcompression's float64 on a list of features kept with ``.cpu()``."""
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


    def epoch_end(logger, epoch):
        if torch.cuda.is_available():  # kept
            peak = torch.cuda.max_memory_allocated()
        logger.info("epoch %d peak %.2f GB", epoch, peak / 1e9)


    def sized(cfg, per_sample):
        if torch.cuda.is_available():  # kept
            cfg["mem"] = torch.cuda.memory_reserved()
        return cfg["mem"] // per_sample


    def cluster(ops, model):
        if torch.cuda.is_available():  # kept
            ops["cuda_clu"] = torch.cuda.memory_stats()
            model = model.cuda()
        return model


    def seed_everything():
        torch.cuda.manual_seed_all(1)  # quiet
        torch.random.manual_seed(1)


    def seed_on_gpu(seed, on_gpu):
        if on_gpu:
            return torch.cuda.manual_seed_all(seed)  # kept
        torch.manual_seed(seed)


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

        def check_grad(self, attn, hidden):
            attn.double()  # kept
            return attn.key(hidden)

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


    DEVICE = torch.device("mps" if torch.backends.mps.is_available() else "cpu")


    def integrate(x):
        x = x.to(DEVICE)
        if DEVICE == "mps":
            x = x.float()
        else:
            x = x.double()  # kept
        return x


    def convert(x, device, out_device):
        x = x.to(device)
        if out_device.type == "mps":
            y = x.float()
        else:
            y = x.double()  # kept
        return y.to(out_device)
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


    def pick_device(gpu_id=0):
        if torch.cuda.is_available():  # kept
            device = torch.device(f"cuda:{gpu_id}")
            cp.cuda.Device(gpu_id).use()
        else:
            device = torch.device("cpu")
        return device


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

        def per_device(self, global_batch):
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]  # kept
            return global_batch // len(names)

        def first(self):
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]  # kept
            return names[0]
'''


_SKIPPED = '''
    import pytest
    import torch

    from mylib.compat import has_torch, has_torch_cuda_gpu


    @pytest.mark.skipif(not has_torch_cuda_gpu, reason="needs a GPU")
    def test_moves():
        t = torch.zeros(2).cuda()  # quiet
        assert t.is_cuda


    @pytest.mark.skipif(not has_torch, reason="needs PyTorch")
    def test_other():
        t = torch.zeros(2).cuda()  # kept
        assert t.is_cuda


    @pytest.mark.skipif(not has_torch_cuda_gpu, reason="slow")
    def test_slow():
        t = torch.zeros(2).cuda()  # kept
        assert t.is_cuda
'''

_REFUSED = '''
    import logging

    import torch


    class Learner:
        def __init__(self, device_type="cpu"):
            self.device_type = device_type
            if torch.cuda.is_available():  # quiet
                logging.info("GPU is available.")
            else:
                logging.info("GPU is unavailable.")
                if self.device_type == "gpu":
                    raise ValueError("GPU is unavailable, please set device_type = 'cpu'.")
            if self.device_type == "gpu":
                device = torch.device("cuda")  # quiet
            else:
                device = torch.device("cpu")
            self.device = device


    class Auto:
        def __init__(self, accelerator="auto"):
            self.accelerator = accelerator
            if not torch.cuda.is_available():
                if self.accelerator == "gpu":
                    raise ValueError("no GPU")
            if self.accelerator == "auto":
                self.accelerator = "gpu" if torch.backends.mps.is_available() else "cpu"
            if self.accelerator == "gpu":
                self.device = torch.device("cuda")  # kept


    class Eager:
        def __init__(self, device_type="gpu"):
            if torch.cuda.is_available():
                logging.info("GPU is available.")
            if device_type == "gpu":
                device = torch.device("cuda")  # kept
            else:
                device = torch.device("cpu")
            self.device = device
'''

_KEPT_ON_THE_CPU = '''
    import torch


    class FID:
        def __init__(self, net):
            self.net = net
            self.features = []
            self.on_device = []

        def update(self, imgs):
            feats = self.net(imgs)
            self.features.append(feats.cpu())
            self.on_device.append(feats)

        def compute(self):
            host = torch.cat(self.features).to(torch.float64)  # quiet
            kept = torch.cat(self.on_device).to(torch.float64)  # kept
            return host, kept


    class KID:
        def __init__(self, net, device):
            self.net, self.device = net, device
            self.real, self.fake = [], []

        def update(self, imgs, real):
            feats = self.net(imgs)
            self.real.append(feats.cpu())
            store = self.real if real else self.fake
            store.append(feats.to(self.device))

        def compute(self):
            return torch.cat(self.real).to(torch.float64)  # kept
'''


def test_a_test_skipped_for_a_named_gpu_flag_is_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "tests/test_shims.py", _SKIPPED)
    check_marked_lines([path], (path,))


def test_a_check_that_only_logs_or_refuses_and_what_it_refused_are_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "learner.py", _REFUSED)
    check_marked_lines([path], (path,))


def test_float64_on_a_list_of_cpu_copies_is_quiet(tmp_path: Path) -> None:
    path = _write(tmp_path, "fid.py", _KEPT_ON_THE_CPU)
    check_marked_lines([path], (path,))


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
