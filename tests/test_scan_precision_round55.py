"""Round 55 (docs/precision/round55.md): flags and device counts that CUDA alone turns on.  From the
verdicts of seed 645398, where both judges called each of these guarded: deepke's ASP models call
``.cuda()`` under ``if torch.cuda.device_count() == 1:``; gt4sd's CGCNN pipeline forces its
``disable_cuda`` flag on where CUDA is absent and hands it to ``train``/``validate``, whose ``.cuda()``
calls sit under ``if not disable_cuda:`` (read here for a name, not for gt4sd's dict key); spateo's
``self.device`` is ``"cpu"`` unless CUDA is present (not read: a subclass elsewhere may store another
device).  Beside them, the flags and devices that a CUDA-less run can still turn on, and every shape
the round's two reviews ran to the CUDA line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_ANCHOR = '''
    import torch

    x = torch.zeros(1).cuda()  # kept
'''

_PIPELINE = '''
    import torch


    def train(model, loader, disable_cuda):
        for batch in loader:
            if not disable_cuda:
                batch = batch.cuda(non_blocking=True)  # {mark}
            model(batch)


    def validate(model, loader, disable_cuda=False):
        if disable_cuda:
            device = "cpu"
        else:
            model.cuda()  # {mark}
        return [model(batch) for batch in loader]


    class Pipeline:
        def fit(self, model, loader, training_args):
            disable_cuda = (
                training_args["disable_cuda"] or not torch.cuda.is_available()  # kept
            )
            if not disable_cuda:
                model.cuda()  # {mark}
            for epoch in range(training_args["epochs"]):
                train(model, loader, disable_cuda)
                validate(model, loader, disable_cuda=disable_cuda)
{calls}'''


def test_a_disable_flag_forced_on_without_cuda_guards_its_cuda_lines(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "core.py", _PIPELINE.format(mark="quiet", calls=""))
    check_marked_lines([tmp_path], (pipeline, _write(tmp_path, "anchor.py", _ANCHOR)))
    found = worst_by_line(tmp_path)
    _, reason = found[("core.py", 7, "TP002")]
    assert reason.startswith("`train` runs this line only when its `disable_cuda` is false, and every call in the "
                             "scanned files passes a value true wherever CUDA is absent"), reason
    _, reason = found[("core.py", 25, "TP002")]
    assert reason == "inside a CUDA check: runs only where CUDA is present", reason


def test_the_forced_flag_really_keeps_the_pipeline_off_cuda(tmp_path: Path) -> None:
    """The pipeline above, run on this CPU build of torch with ``disable_cuda`` False: it trains
    and validates on the CPU, where the same code without the forcing line fails at ``.cuda()``."""
    body = _PIPELINE.format(mark="quiet", calls="").replace("model(batch)", "model(batch.float())")
    run = body + '''
    if __name__ == "__main__":
        model = torch.nn.Linear(2, 1)
        Pipeline().fit(model, [torch.ones(3, 2)], {"disable_cuda": False, "epochs": 1})
        print("trained on the CPU")
    '''
    forced = _write(tmp_path, "forced.py", run)
    done = subprocess.run([sys.executable, str(forced)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "trained on the CPU" in done.stdout, done.stderr[-2000:]
    unforced = _write(tmp_path, "unforced.py", run.replace(
        'training_args["disable_cuda"] or not torch.cuda.is_available()', 'training_args["disable_cuda"]'))
    done = subprocess.run([sys.executable, str(unforced)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "CUDA" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(("calls", "kept_in"), [
    # another call hands the user's own flag on
    ('''
    def evaluate(model, loader, disable_cuda):
        return validate(model, loader, disable_cuda)
    ''', ("validate",)),
    # a call leaves the flag to its default (False); `not torch.cuda.is_available()` is forced on
    ('''
    def evaluate(model, loader):
        train(model, loader, not torch.cuda.is_available())
        return validate(model, loader)
    ''', ("validate",)),
    # a call through *args / **kwargs
    ('''
    def evaluate(model, loader, *args, **kwargs):
        train(model, loader, *args)
        return validate(model, loader, **kwargs)
    ''', ("train", "validate")),
    # the functions handed on as values: called where this file does not show
    ('''
    STEPS = {"train": train, "validate": validate}
    ''', ("train", "validate")),
])
def test_a_call_that_may_pass_a_false_flag_keeps_the_lines(tmp_path: Path, calls: str,
                                                           kept_in: tuple[str, ...]) -> None:
    source = _PIPELINE
    if "train" in kept_in:
        source = source.replace("batch.cuda(non_blocking=True)  # {mark}", "batch.cuda(non_blocking=True)  # kept")
    if "validate" in kept_in:
        source = source.replace("model.cuda()  # {mark}\n        return", "model.cuda()  # kept\n        return")
    pipeline = _write(tmp_path, "core.py", source.format(mark="quiet", calls=calls))
    check_marked_lines([tmp_path], (pipeline, _write(tmp_path, "anchor.py", _ANCHOR)))


@pytest.mark.parametrize("forcing", [
    # `and`: false without CUDA, so `not flag` holds there
    'training_args["disable_cuda"] = training_args["disable_cuda"] and not torch.cuda.is_available()',
    # forced only in one branch
    'if training_args.get("auto"):\n'
    '            training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()',
    # forced, then set again from the user's settings
    'training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()\n'
    '        training_args.update(overrides)',
    'training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()\n'
    '        training_args["disable_cuda"] = overrides["disable_cuda"]',
    # the dict handed to a call, which may change the key
    'training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()\n'
    '        apply_overrides(training_args)',
    # a dict's key, whatever follows: any other reference to the dict may change it
    'training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()',
    # a local name in the other term does not matter, but the query must be CUDA's
    'training_args["disable_cuda"] = training_args["disable_cuda"] or not use_gpu',
])
def test_a_flag_that_may_stay_off_without_cuda_keeps_the_lines(tmp_path: Path, forcing: str) -> None:
    source = _write(tmp_path, "core.py", f'''
    import torch


    def run(model, training_args, overrides, use_gpu):
        {forcing}
        if not training_args["disable_cuda"]:
            model.cuda()  # kept
        return model
    ''')
    kept_lines_stay(source, "TP002")


def test_a_parameter_no_call_forces_or_the_function_rebinds_keeps_the_lines(tmp_path: Path) -> None:
    source = _write(tmp_path, "steps.py", '''
    import torch


    def train(model, disable_cuda):
        if not disable_cuda:
            model.cuda()  # kept
        return model


    def validate(model, disable_cuda):
        disable_cuda = disable_cuda and model.small
        if not disable_cuda:
            model.cuda()  # kept
        return model


    def fit(model, training_args):
        training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()
        return validate(model, training_args["disable_cuda"])
    ''')
    kept_lines_stay(source, "TP002")


def test_a_local_flag_forced_on_after_its_first_value_guards(tmp_path: Path) -> None:
    source = _write(tmp_path, "local.py", '''
    import torch


    def run(model, cfg):
        cpu_only = cfg.cpu_only
        cpu_only = cpu_only or not torch.cuda.is_available()
        if cpu_only:
            return model
        return model.cuda()  # quiet


    def run_once(model):
        cpu_only = not torch.cuda.is_available()
        if not cpu_only:
            model = model.cuda()  # quiet
        return model


    def run_again(model, cfg):
        cpu_only = cfg.cpu_only or not torch.cuda.is_available()
        model.cuda()  # kept
        if cpu_only:
            return model
        for step in cfg.steps:
            if not cpu_only:
                model = model.cuda()  # kept
            cpu_only = step.on_cpu
        return model
    ''')
    check_marked_lines([source], (source,))


_ASP = '''
    import torch


    class Model:
        def parallel_preparation_inference(self):
            if torch.cuda.device_count() == 1:
                self.model = self.model.cuda()  # quiet
                return
            if torch.cuda.device_count() in (2, 4):
                self.model = self.model.cuda()  # quiet
            self.model.heads = self.model.heads.to(self.device)

        def one_or_many(self):
            if torch.cuda.device_count() == 1:
                return self.model
            else:
                return self.model.cuda()  # kept

        def many_only(self, cfg):
            if cfg.single or torch.cuda.device_count() == 1:
                return self.model
            return self.model.cuda()  # kept

        def none_or_many(self):
            if torch.cuda.device_count() == 0:
                return self.model.cuda()  # kept
            return self.model
'''


def test_a_device_count_equal_to_a_positive_number_guards(tmp_path: Path) -> None:
    source = _write(tmp_path, "asp.py", _ASP)
    check_marked_lines([source], (source,))


_GP = '''
    import torch


    class Imputation:
        def __init__(self, x, y, device="cpu"):
            self.device = f"cuda:{{device}}" if torch.cuda.is_available() and device != "cpu" else "cpu"
            if self.device == "cpu":
                self.x = x
            else:
                self.x = x.cuda()  # {mark}
            self.y = y.cpu() if self.device == "cpu" else y.cuda()  # {mark}

        def fit(self, model):
            if self.device != "cpu":
                model = model.cuda()  # {mark}
            return model
{extra}'''


def test_a_device_that_is_cpu_unless_cuda_is_present_is_not_read(tmp_path: Path) -> None:
    """spateo's GP interpolation: ``self.device`` is ``"cpu"`` unless CUDA is present, in this
    file; a subclass in another file may store the user's own device (``"mps"``), so the comparisons
    stay plain ones (the first version read them as CUDA checks; its reviews ran such subclasses to
    the ``.cuda()`` line)."""
    source = _write(tmp_path, "gp.py", _GP.format(mark="kept", extra=""))
    _write(tmp_path, "sub.py", '''
    from gp import Imputation


    class OnDevice(Imputation):
        def __init__(self, x, y, device="mps"):
            super().__init__(x, y)
            self.device = device
    ''')
    kept_lines_stay(source, "TP002", root=tmp_path)


@pytest.mark.parametrize("extra", [
    # the device set again from what the caller asks for
    '''
        def to(self, device):
            self.device = device
            return self
    ''',
    # a choice the user's own flag makes, not CUDA
    '''
        def use(self, gpu):
            self.device = "cuda" if gpu else "cpu"
    ''',
    # what the reviews ran to the CUDA line: a store on another object, a tuple target, setattr
    # with any name, a state dict, vars(), a choice that reads itself
    '''
    def load(saved):
        imputation = Imputation(None, None)
        imputation.device = saved["device"]
        return imputation
    ''',
    '''
        def configure(self, settings, **options):
            self.device, self.dtype = settings["device"], settings["dtype"]
            for name, value in options.items():
                setattr(self, name, value)
    ''',
    '''
        def load(self, state):
            self.__dict__.update(state)
    ''',
    '''
        def load(self, state):
            vars(self).update(state)
    ''',
    '''
        def load(self, state):
            setattr(self, "device", state["device"])
    ''',
    '''
        def refresh(self):
            self.device = self.device if self.device != "cpu" and torch.cuda.is_available() else "cpu"
    ''',
])
def test_a_device_that_may_name_cuda_without_cuda_keeps_the_lines(tmp_path: Path, extra: str) -> None:
    source = _write(tmp_path, "gp.py", _GP.format(mark="kept", extra=extra))
    kept_lines_stay(source, "TP002")


def test_a_disable_flag_handed_down_or_returned_on_guards_across_functions(tmp_path: Path) -> None:
    """Round 49's reading of flag parameters, for a flag that must be false: after ``if no_cuda or
    ...: return``, through a caller's own parameter, from a name bound once to ``... or not
    torch.cuda.is_available()``; a default that would run the line is named "default only"."""
    source = _write(tmp_path, "steps.py", '''
    import torch


    def step(model, batch, no_cuda=False):
        if no_cuda or batch is None:
            return model(batch)
        return model(batch.cuda())  # quiet


    def epoch(model, loader, no_cuda):
        return [step(model, batch, no_cuda) for batch in loader]


    def run(model, loader, cfg):
        no_cuda = cfg.no_cuda or not torch.cuda.is_available()
        return epoch(model, loader, no_cuda)


    def probe(model, batch, cpu_only):
        if not cpu_only:
            return model(batch.cuda())  # kept
        return model(batch)


    def run_probe(model, batch, cfg):
        return probe(model, batch, cfg.cpu_only and not torch.cuda.is_available())
    ''')
    check_marked_lines([tmp_path], (source,))
    _, reason = worst_by_line(tmp_path)[("steps.py", 7, "TP002")]
    assert "`no_cuda` is false" in reason and "through `epoch`" in reason and "default only" in reason, reason


def test_tests_that_hold_without_cuda_but_name_no_device_keep_the_lines(tmp_path: Path) -> None:
    """A global another function resets, a backend list holding "nccl" and "gloo", a device list
    holding "cpu", a CUDA query handed to a flag that must be false; beside them, a list of CUDA
    devices and ``device_count() == 1`` handed to a flag that must be true."""
    source = _write(tmp_path, "misc.py", '''
    import torch

    cpu_only = False


    def reset():
        global cpu_only
        cpu_only = False


    def run(model):
        global cpu_only
        cpu_only = cpu_only or not torch.cuda.is_available()
        reset()
        if not cpu_only:
            model.cuda()  # kept
        return model


    def launch(model, backend):
        if backend not in ["nccl", "gloo"]:
            raise ValueError(backend)
        return model.cuda()  # kept


    def pick(model, device):
        if device in ("cuda", "cpu", "auto"):
            model = model.cuda()  # kept
        if device in ("cuda", "cuda:0"):
            model = model.cuda()  # quiet
        return model


    def probe(model, batch, cpu_only):
        if not cpu_only:
            return model(batch.cuda())  # kept
        return model(batch)


    def run_probe(model, batch):
        return probe(model, batch, torch.cuda.is_available())


    def single(model, batch, one_gpu):
        if one_gpu:
            return model(batch.cuda())  # quiet
        return model(batch)


    def run_single(model, batch):
        return single(model, batch, torch.cuda.device_count() == 1)
    ''')
    check_marked_lines([tmp_path], (source,))


# Shapes an independent review ran on the CPU build of torch to the CUDA line, which the first
# version lowered; each must stay an error.
_REVIEWED = {
    "augmented": '''
    class Runner:
        def __init__(self, local_rank=0):
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
            self.device += f":{local_rank}"

        def run(self, model):
            if self.device != "cpu":
                model = model.cuda()  # kept
            return model
    ''',
    "another scope's name": '''
    use_gpu = torch.cuda.is_available()


    class Imputation:
        def __init__(self, use_gpu=use_gpu):
            self.device = "cuda" if use_gpu else "cpu"

        def fit(self, model):
            if self.device != "cpu":
                model = model.cuda()  # kept
            return model
    ''',
    "another spelling of the CPU": '''
    class Imputation:
        def __init__(self, device="cpu"):
            self.device = f"cuda:{device}" if torch.cuda.is_available() and device != "cpu" else "cpu"

        def fit(self, model):
            if self.device != "cpu:0":
                model = model.cuda()  # kept
            return model
    ''',
    "a class attribute": '''
    class Runner:
        device = "cuda"

        def setup(self, gpu=0):
            self.device = f"cuda:{gpu}" if torch.cuda.is_available() else "cpu"

        def run(self, model):
            if self.device != "cpu":
                model = model.cuda()  # kept
            return model
    ''',
    "a module flag another function rebinds": '''
    CPU_ONLY = not torch.cuda.is_available()


    def parse_args(args):
        global CPU_ONLY
        CPU_ONLY = args.cpu_only


    def predict(model):
        if not CPU_ONLY:
            model = model.cuda()  # kept
        return model
    ''',
    "a walrus and a nonlocal": '''
    def predict(model, environ):
        cpu_only = not torch.cuda.is_available()
        if (cpu_only := environ.get("CPU_ONLY", "0") == "1"):
            print("forced onto the CPU")
        if not cpu_only:
            model = model.cuda()  # kept
        return model


    def main(model, argv):
        cpu_only = not torch.cuda.is_available()

        def parse(args):
            nonlocal cpu_only
            cpu_only = "--cpu" in args

        parse(argv)
        if not cpu_only:
            model = model.cuda()  # kept
        return model
    ''',
    "a lambda, a nested reset and a build without a GPU": '''
    def make_mover(settings):
        settings["disable_cuda"] = settings["disable_cuda"] or not torch.cuda.is_available()
        return lambda t: t if settings["disable_cuda"] else t.cuda()  # kept


    def fit(model, training_args, overrides):
        def reset():
            training_args["disable_cuda"] = overrides.get("disable_cuda", False)

        training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.cuda.is_available()
        reset()
        if not training_args["disable_cuda"]:
            model.cuda()  # kept
        return model


    def fit_on_build(model, training_args):
        training_args["disable_cuda"] = training_args["disable_cuda"] or not torch.version.cuda
        if not training_args["disable_cuda"]:
            model = model.cuda()  # kept
        return model
    ''',
}


@pytest.mark.parametrize("shape", sorted(_REVIEWED))
def test_what_the_review_ran_to_the_cuda_line_stays(tmp_path: Path, shape: str) -> None:
    source = _write(tmp_path, "reviewed.py", "\n    import torch\n\n" + _REVIEWED[shape])
    kept_lines_stay(source)
