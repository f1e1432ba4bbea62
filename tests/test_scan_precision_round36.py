"""Mixed precision the user has to turn on.  Shapes from the verdicts of three judges (seeds
976340, 811980, 501976): dalle2-pytorch's VQGAN trainer (``amp = False``,
``self.amp = amp``, ``GradScaler(enabled = amp)``, ``autocast(enabled = self.amp)``), torch-mimicry's
``if self.amp:`` and yolox's ``GradScaler(enabled=args.fp16)``.  Each judged incorrect at silent:
with the option off, as it is by default, no accelerator runs mixed precision."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, worst_by_line
from scan_marks import write_snippet as _write

_TRAINER = """
    import argparse

    import torch
    from torch.cuda.amp import GradScaler, autocast


    class VQGanVAETrainer:
        def __init__(self, vae, amp=False):
            self.vae = vae
            self.amp = amp
            self.scaler = GradScaler(enabled = amp)  # quiet

        def train_step(self, img):
            with autocast(enabled=self.amp):  # quiet
                return self.vae(img)

        def discr_step(self, img):
            if self.amp:
                scaler = torch.cuda.amp.GradScaler()  # quiet
                return scaler


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--fp16", action="store_true")
        args = parser.parse_args()
        return torch.cuda.amp.GradScaler(enabled=args.fp16)  # quiet
"""

# AMP on by default, or enabled only where CUDA is: elsewhere it silently stays off.
_ON = """
    import torch


    class Finetuner:
        def __init__(self, model, amp=True):
            self.model = model
            self.amp = amp
            self.scaler = torch.cuda.amp.GradScaler(enabled=amp)  # kept

        def make_amp(self, device):
            use_amp = self.amp and device.type == "cuda" and torch.cuda.is_available()
            return torch.GradScaler("cuda", enabled=use_amp)  # kept

        def step(self, x):
            with torch.cuda.amp.autocast(enabled=self.amp):  # kept
                return self.model(x)


    def train(model, x, amp):
        # a parameter every call must pass: the caller decides
        with torch.cuda.amp.autocast(enabled=amp):  # kept
            return model(x)


    class Probe:
        def __init__(self, fp16=False):
            self.fp16 = fp16
            # the arguments run whether or not enabled= holds
            self.scaler = torch.cuda.amp.GradScaler(enabled=self.fp16, init_scale=torch.cuda.get_device_capability()[0])  # kept
"""


# What the review of the round's first version found lowered that runs, or runs with AMP on; each
# case in a file of its own, since what a file stores under a name is read file-wide.
_REVIEWED = {
    "loop.py": """
        import torch


        class Trainer:
            def __init__(self, model, amp=False):
                self.model = model
                self.amp = amp

            def step(self, x):
                with torch.autocast("cuda", enabled=self.amp):  # kept
                    return self.model(x)


        def benchmark(model, x):
            trainer = Trainer(model)
            for amp in (False, True):
                trainer.amp = amp
                trainer.step(x)
    """,
    "subclass.py": """
        import torch


        class Base:
            def __init__(self, model, amp=False):
                self.amp = amp
                self.scaler = torch.cuda.amp.GradScaler(enabled=self.amp)  # kept


        class FastTrainer(Base):
            def __init__(self, model):
                super().__init__(model, amp=True)
    """,
    "switched.py": """
        import torch


        class Switched:
            def __init__(self, fp16=False):
                self.fp16 = fp16

            def half(self):
                self.fp16 = True

            def step(self, x):
                with torch.cuda.amp.autocast(enabled=self.fp16):  # kept
                    return x
    """,
    "derived.py": """
        import torch


        class Derived:
            def __init__(self, use_amp=False):
                use_amp = use_amp and torch.cuda.is_available()
                self.use_amp = use_amp
                self.scaler = torch.cuda.amp.GradScaler(enabled=self.use_amp)  # kept
    """,
    "cuda_caller.py": """
        import torch


        class Trainer:
            def __init__(self, model, amp=False):
                self.amp = amp
                self.scaler = torch.cuda.amp.GradScaler(enabled=self.amp)  # kept


        def build(model):
            # AMP on by default where CUDA is, silently off elsewhere
            return Trainer(model, amp=torch.cuda.is_available())
    """,
    "inline_cuda.py": """
        import torch


        class Trainer:
            def __init__(self, model, amp=False):
                self.amp = amp
                self.scaler = torch.cuda.amp.GradScaler(enabled=self.amp and torch.cuda.is_available())  # kept
    """,
    "unrelated_keyword.py": """
        import logging

        import torch


        def report(verbose=False):
            if verbose:
                torch.cuda.synchronize()  # quiet


        def main():
            # a keyword of a function this file does not define turns no option of it on
            logging.basicConfig(force=True)
            log = logging.getLogger(__name__)
            log.info("x", stacklevel=2, verbose=True)
    """,
    "other_apis.py": """
        import argparse

        import torch


        def main(model, data, trainer_class):
            parser = argparse.ArgumentParser()
            parser.add_argument("--snapshot", action="store_true")
            parser.add_argument("--ema", action="store_true")
            args = parser.parse_args()
            # not mixed precision: this raises without CUDA whatever enabled= says
            torch.cuda.memory._record_memory_history(enabled=args.snapshot)  # kept
            # enabled= gates fit(), not the .cuda() in its receiver
            return trainer_class(model.cuda()).fit(data, enabled=args.ema)  # kept
    """,
}


def test_amp_the_user_turns_on(tmp_path: Path) -> None:
    paths = (_write(tmp_path, "trainer.py", _TRAINER), _write(tmp_path, "finetune.py", _ON),
             *(_write(tmp_path / "reviewed", name, source) for name, source in _REVIEWED.items()))
    check_marked_lines([tmp_path], paths)
    found = worst_by_line(tmp_path)
    assert "`amp`" in found[("trainer.py", 11, "TP202")][1]
    assert "`self.amp`" in found[("trainer.py", 14, "TP201")][1]
    assert "`self.fp16`" in found[("finetune.py", 29, "TP202")][1]
    assert found[("finetune.py", 29, "TP005")][0] == "error"
    # the scaler itself, beside the availability check on its line
    assert worst_by_line(tmp_path / "reviewed")[("inline_cuda.py", 7, "TP202")][0] == "silent"
