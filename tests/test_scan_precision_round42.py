"""Round 42 (docs/precision/round42.md): a CUDA check that only picks where a state dict is read
before ``load_state_dict`` copies it into a module, in the shapes check_consequence.py's
``_staging_only`` did not read.  From the verdicts: torchsr's ``load_pretrained``, whose
``if torch.cuda.is_available():`` binds the map location in both branches (both judges of seed
555827 found five such rows incorrect), pfrl's map location passed positionally to ``torch.load``,
and masr's two loads, one with a map location, in the branches of the check.  Beside them, the
close shapes where the check does decide where work runs: a pickled module loaded and run, a map
location also used as the device, a module taken out of a checkpoint, a checkpoint returned."""
from __future__ import annotations

import io
from pathlib import Path

import torch

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_STAGED = '''
    import torch
    from torch.hub import load_state_dict_from_url


    class Net(torch.nn.Module):
        def load_pretrained(self, url, map_location=None):
            if torch.cuda.is_available():  # quiet
                map_location = torch.device("cuda")
            else:
                map_location = torch.device("cpu")
            state_dict = load_state_dict_from_url(url, map_location=map_location, progress=True)
            self.load_state_dict(state_dict)

        def load_small(self, url, map_location=None):
            if not torch.cuda.is_available():  # quiet
                map_location = torch.device("cpu")
            self.load_state_dict(load_state_dict_from_url(url, map_location=map_location))

        def restore(self, path):
            map_location = torch.device("cpu") if not torch.cuda.is_available() else None  # quiet
            self.load_state_dict(torch.load(path, map_location))

        def warm_start(self, path):
            if torch.cuda.is_available():  # quiet
                state = torch.load(path, weights_only=False)
            else:
                state = torch.load(path, weights_only=False, map_location="cpu")
            for name in list(state.keys()):
                if name not in self.state_dict():
                    state.pop(name)
            self.load_state_dict(state, strict=False)
'''

_DECIDES = '''
    import torch


    def predict(path, x):
        loc = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        model = torch.load(path, map_location=loc, weights_only=False)
        return model(x)


    def serve(path, x):
        map_location = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        net = torch.nn.Linear(2, 2)
        net.load_state_dict(torch.load(path, map_location=map_location))
        return net.to(map_location)(x)


    def detect(path, x):
        map_location = None if torch.cuda.is_available() else "cpu"  # kept
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
        model = ckpt["model"]
        return model.eval()(x)


    class Detector(torch.nn.Module):
        def load_c(self, path, map_location="cuda"):
            # without CUDA the default stands: torch.load onto "cuda" raises
            if torch.cuda.is_available():  # kept
                map_location = "cuda:0"
            self.load_state_dict(torch.load(path, map_location=map_location))

        def load_reversed(self, path):
            if torch.cuda.is_available():  # kept
                sd = torch.load(path, map_location="cuda")
            else:
                sd = torch.load(path)
            self.load_state_dict(sd)

        def load_anchors(self, path):
            if torch.cuda.is_available():  # kept
                loc = "cuda"
            else:
                loc = "cpu"
            ckpt = torch.load(path, map_location=loc)
            self.load_state_dict(ckpt["model"])
            self.anchors = ckpt["anchors"]

        def load_assigned(self, path):
            loc = "cuda" if torch.cuda.is_available() else "cpu"  # kept
            self.load_state_dict(torch.load(path, map_location=loc), assign=True)


    def attempt_load(path, x):
        if torch.cuda.is_available():  # kept
            ckpt = torch.load(path, weights_only=False)
        else:
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
        model = ckpt["model"].float()
        model.load_state_dict(ckpt["ema"])
        return model(x)


    def load_dict_from_checkpoint(ckpt_path):
        # returned: what the caller does with the tensors is not read here
        if not torch.cuda.is_available():  # kept
            ckpt_dict = torch.load(ckpt_path, map_location=lambda storage, loc: storage)
        else:
            ckpt_dict = torch.load(ckpt_path)
        return ckpt_dict


    def load_model(path):
        if torch.cuda.is_available():  # kept
            model = torch.load(path, weights_only=False)
        else:
            model = torch.load(path, map_location="cpu", weights_only=False)
        return model
'''


def test_a_check_that_only_stages_a_state_dict_is_quiet_and_one_that_decides_is_kept(tmp_path: Path) -> None:
    staged, decides = _write(tmp_path, "net.py", _STAGED), _write(tmp_path, "serve.py", _DECIDES)
    check_marked_lines([staged, decides], (staged, decides))


def test_load_state_dict_copies_into_the_parameters_where_they_are() -> None:
    # what the reading rests on: a state dict read onto the CPU is copied into the module's own
    # parameters, which keep their place and dtype (here float64, standing in for another device)
    module = torch.nn.Linear(2, 2).double()
    weight = module.weight
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2).state_dict(), buffer)
    buffer.seek(0)
    module.load_state_dict(torch.load(buffer, map_location="cpu"))
    assert module.weight is weight and module.weight.dtype == torch.float64
