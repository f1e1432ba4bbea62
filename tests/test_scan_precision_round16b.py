"""Round 16b: where a hard-coded "cuda" device value goes, across the scanned package
(docs/precision/round16b.md).  A "cuda" value that the package remaps to the CPU where CUDA is
absent runs on the CPU (silent, not error); a default that every caller in the package passes
is never used (info).  Each snippet is written for these tests, shaped like the judged code, and
holds a close line that keeps its class.  Lines end in the severity scan must give them:
``# silent``, ``# error`` (the worst over all targets), or ``# quiet`` (info or lower)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scan_marks import ALL_TARGETS
from scan_marks import write_snippet as _write
from torchport.scan.rules import finding_worst
from torchport.scan.config import ScanConfig
from torchport.scan.scanner import scan

_MARKS = ("silent", "error", "quiet")


def _check(root: Path) -> dict[tuple[str, int], str]:
    """Scan ``root`` and hold every marked line to its mark; the findings' worst severities."""
    result = scan([root], ScanConfig(), jobs=1)
    assert not result.skipped, result.skipped
    worst: dict[tuple[str, int], str] = {}
    reasons: dict[tuple[str, int], str] = {}
    for finding in result.findings:
        if finding.rule_id != "TP001":
            continue
        key = (Path(finding.path).name, finding.line)
        severity = finding_worst(finding, ALL_TARGETS) or "info"
        order = ("error", "silent", "perf", "info")
        if key not in worst or order.index(severity) < order.index(worst[key]):
            worst[key] = severity
            reasons[key] = finding.cap_reason
    marked = 0
    for path in root.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            mark = next((m for m in _MARKS if line.endswith(f"# {m}")), None)
            if mark is None:
                continue
            marked += 1
            found = worst.get((path.name, number))
            assert found is not None, (path.name, number, "not reported")
            expected = {"silent": ("silent",), "error": ("error",), "quiet": ("perf", "info")}[mark]
            assert found in expected, (path.name, number, found, reasons.get((path.name, number)))
    assert marked
    return reasons


_BASE = '''
    import warnings

    import torch


    class Pipeline:
        def __init__(self, model, device="cuda:0"):  # silent
            if "cuda" in device and not torch.cuda.is_available():
                warnings.warn(f"{device} is not available, running on the CPU", stacklevel=2)
                device = "cpu"
            self.device = device
            self.model = model.to(self.device)


    def move(batch, device):
        if device.startswith("cuda") and not torch.cuda.is_available():
            device = "cpu"
        return batch.to(device)


    def place(batch, device):
        return batch.to(device)
'''

_TASKS = '''
    from .base import Pipeline, move, place


    class Tagger(Pipeline):
        def __init__(self, model, device: str = "cuda:0"):  # silent
            super().__init__(model, device=device)


    class Scorer(Pipeline):
        def __init__(self, model, device: str = "cuda:0"):  # error
            model = model.to(device)
            super().__init__(model, device=device)


    def run(batch, device="cuda"):  # silent
        return move(batch, device)


    def run_fast(batch, device="cuda"):  # error
        return place(batch, device)
'''

_CHOICE = '''
    import torch


    def pick(device="auto"):
        if device == "auto":
            device = "cuda"  # silent
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available():
            return torch.device("cpu")
        return device


    def pick_strict(device="auto"):
        if device == "auto":
            device = "cuda"  # error
        return torch.device(device)
'''


def _fallback_package(root: Path) -> Path:
    package = root / "pipes"
    _write(package, "__init__.py", "")
    _write(package, "base.py", _BASE)
    _write(package, "tasks.py", _TASKS)
    _write(package, "choice.py", _CHOICE)
    return package


def test_a_cuda_value_remapped_to_the_cpu_where_it_is_handed_is_silent_not_error(tmp_path):
    reasons = _check(_fallback_package(tmp_path))
    assert "falls back to the CPU in Pipeline.__init__ (base.py:8)" in reasons[("tasks.py", 5)]
    assert "falls back to the CPU in move (base.py:16)" in reasons[("tasks.py", 15)]
    assert "falls back to the CPU at line 8" in reasons[("choice.py", 6)]


def test_the_remapped_defaults_run_on_this_cpu_build(tmp_path):
    # the measurement behind the rule: with the defaults, the work runs on the CPU instead of raising
    _fallback_package(tmp_path)
    script = (
        "import warnings, torch\n"
        "warnings.simplefilter('ignore')\n"
        "from pipes.tasks import Tagger, Scorer, run, run_fast\n"
        "from pipes.choice import pick, pick_strict\n"
        "assert not torch.cuda.is_available()\n"
        "print(Tagger(torch.nn.Linear(2, 2)).device, run(torch.ones(1)).device, pick())\n"
        "for call in (lambda: Scorer(torch.nn.Linear(2, 2)), lambda: run_fast(torch.ones(1)),\n"
        "             lambda: torch.ones(1, device=pick_strict())):\n"
        "    try:\n"
        "        call()\n"
        "    except (AssertionError, RuntimeError):\n"
        "        print('raises')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "cpu", "cpu", "raises", "raises", "raises"]


_TRAINER = '''
    class Trainer:
        def __init__(self, model, **kwargs):
            self.device = kwargs.get("device", "cuda")  # quiet
            self.model = model

        def wrap(self, model, **kwargs):
            return model.to(device=kwargs.get("device", "cuda"))  # quiet

        def wrap_again(self, model, **kwargs):
            return model.to(device=kwargs.get("device", "cuda"))  # error
'''

_TRAIN = '''
    import torch

    from .trainer import Trainer


    def main(model, options, **kwargs):
        kwargs["device"] = "cpu" if not torch.cuda.is_available() else "cuda"
        model = model.to(device=kwargs.get("device", "cuda"))  # quiet
        trainer = Trainer(model, device=kwargs["device"])
        model = trainer.wrap(model, **kwargs)
        return trainer.wrap_again(model, **options)


    def evaluate(model, **kwargs):
        return model.to(kwargs.get("device", "cuda"))  # error
'''

_OPTIONS = '''
    import argparse

    import torch


    def parse(argv):
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cpu")
        return parser.parse_args(argv)


    def setup(args):
        return torch.device(getattr(args, "device", "cuda"))  # quiet


    def setup_rank(args):
        return torch.device(getattr(args, "rank_device", "cuda"))  # error


    class Runner:
        def place(self, batch):
            return batch.to(getattr(self, "device", "cuda"))  # error
'''


def test_a_device_default_every_caller_fills_is_default_only(tmp_path):
    package = tmp_path / "trainkit"
    _write(package, "__init__.py", "")
    _write(package, "trainer.py", _TRAINER)
    _write(package, "train.py", _TRAIN)
    _write(package, "options.py", _OPTIONS)
    reasons = _check(package)
    assert reasons[("trainer.py", 3)] == "default only: every call in the scanned files passes device"
    assert reasons[("train.py", 8)] == "default only: kwargs['device'] is set at line 7, before this"
    assert reasons[("options.py", 13)].startswith("default only: the package's --device option (options.py:8)")


_ANCHORS = '''
    import torch


    class BaseFitter:
        def __init__(self, boxes, device="cuda:0"):  # quiet
            self.boxes = torch.as_tensor(boxes, device=device)


    class KMeansFitter(BaseFitter):
        def fit(self):
            return self.boxes.mean(0)


    class GreedyFitter(BaseFitter):
        def __init__(self, boxes, device="cuda:0"):  # error
            super().__init__(boxes, device)
'''

_TOOL = '''
    from .anchors import GreedyFitter, KMeansFitter


    def main(args):
        fitter = KMeansFitter(args.boxes, device=args.device)
        greedy = GreedyFitter(args.boxes)
        return fitter.fit(), greedy
'''


def test_a_default_every_caller_passes_through_a_subclass_is_default_only(tmp_path):
    package = tmp_path / "anchorkit"
    _write(package, "__init__.py", "")
    _write(package, "anchors.py", _ANCHORS)
    _write(package, "tool.py", _TOOL)
    reasons = _check(package)
    assert reasons[("anchors.py", 5)] == "default only: every call in the scanned files passes device"
