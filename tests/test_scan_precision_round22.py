"""Round 22: four shapes the judges found mostly wrong at error or silent, lowered with the reason
in the output, each beside neighbours that keep their severity.

- A CUDA check whose choice has the same code on both sides (``0 if torch.cuda.is_available()
  else 0``): info, nothing differs where CUDA is absent.
- A CUDA check that chooses only a DataLoader's ``num_workers=`` (two counts, the smaller without
  CUDA), directly or through a local read only as the count: perf (fewer loader processes
  elsewhere; the batches are the same), unless the call also sets what raises without workers
  (``prefetch_factor=``, ``persistent_workers=True``).
- ``"cuda"`` alone in a list given to a record class whose entries in the file list CUDA with other
  device types and that the file reads by membership (``BackendInfo(device=["cuda"])`` beside
  ``BackendInfo(device=["cuda", "cpu"])`` and ``if device not in backend.device``): a capability
  table.
- ``DistributedDataParallel(device_ids=[local_rank])`` after the NCCL backend or ``set_device`` in
  its function or class, or after a CUDA device string that places the wrapped module in its
  function, each still at error: DDP takes device indices for a module on any one accelerator, so
  the other line is the tie.

And a false lowering older than the round, found by its review: ``if torch.cuda.is_available():
device = "cuda" else: device = "cpu"`` was taken for a choice of message text (info) since round 8.

The snippets are written for these tests, shaped after judged findings of judges 9 to 20; two
reviews broke two versions, and their cases are here too (docs/precision/round22.md)."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines, kept_lines_stay, worst_by_line
from scan_marks import write_snippet as _write

_LOADERS = '''
    import torch
    from torch.utils.data import DataLoader


    def train_loader(dataset, batch_size):
        return DataLoader(dataset, batch_size=batch_size, shuffle=True,
                          num_workers=4 if torch.cuda.is_available() else 0)  # quiet


    def demo_loader(dataset):
        num_workers = 0 if torch.cuda.is_available() else 0  # quiet
        return DataLoader(dataset, batch_size=8, num_workers=num_workers)


    def eval_loader(dataset):
        workers = 8 if torch.cuda.is_available() else 2  # quiet
        return DataLoader(dataset, batch_size=32, num_workers=workers, persistent_workers=workers > 0)


    def demo_sizes(dataset):
        n_images_max = 100 if torch.cuda.is_available() else 5  # kept
        return dataset[:n_images_max]


    def sized_by_workers(dataset):
        workers = 2 if torch.cuda.is_available() else 0  # kept
        return DataLoader(dataset, batch_size=workers * 8, num_workers=workers)


    def device_for_loader(dataset):
        device = "cuda" if torch.cuda.is_available() else "cpu"  # kept
        return DataLoader(dataset, batch_size=8, pin_memory_device=device)
'''


def test_a_choice_of_loader_processes_or_of_the_same_value_is_info(tmp_path: Path) -> None:
    path = _write(tmp_path, "loaders.py", _LOADERS)
    check_marked_lines([path], (path,))


def test_the_reasons_say_what_the_choice_decides(tmp_path: Path) -> None:
    _write(tmp_path, "loaders.py", _LOADERS)
    found = worst_by_line(tmp_path)
    workers = ("perf", "decides no device: it sets only how many processes the data loader starts (`num_workers=`); "
                       "elsewhere fewer load the data, and the batches are the same")
    assert found[("loaders.py", 7, "TP003")] == workers
    assert found[("loaders.py", 11, "TP003")] == ("info", "changes nothing: both branches of the choice are `0`")
    assert found[("loaders.py", 16, "TP003")] == workers


_LOADERS_THAT_NEED_WORKERS = '''
    import torch
    from torch.utils.data import DataLoader


    def prefetching(dataset):
        return DataLoader(dataset, num_workers=4 if torch.cuda.is_available() else 0,  # kept
                          persistent_workers=True, prefetch_factor=2)


    def prefetching_by_name(dataset):
        workers = 4 if torch.cuda.is_available() else 0  # kept
        return DataLoader(dataset, num_workers=workers, prefetch_factor=4)


    def through_kwargs(dataset, **options):
        return DataLoader(dataset, num_workers=4 if torch.cuda.is_available() else 0, **options)  # kept


    def not_a_loader(model, launch):
        return launch(model, num_workers=4 if torch.cuda.is_available() else 0)  # kept


    def handed_into_a_call(dataset, setup, model):
        return DataLoader(dataset, num_workers=setup(model, 1 if torch.cuda.is_available() else 0))  # kept


    def stored_by_the_test(dataset, model):
        workers = 4 if (use_cuda := torch.cuda.is_available()) else 0  # kept
        model = model.to("cuda" if use_cuda else "cpu")
        return DataLoader(dataset, num_workers=workers), model


    def same_either_way_but_stored(model):
        w = 0 if (ok := torch.cuda.is_available()) else 0  # kept
        return model.to("cuda" if ok else "cpu"), w


    class Trainer:
        def __init__(self, dataset):
            self.gpu = True if torch.cuda.is_available() else False  # kept
            self.loader = DataLoader(dataset, num_workers=8, pin_memory=self.gpu)


    use_gpu = True if torch.cuda.is_available() else False  # kept
    loader_options = dict(num_workers=8, persistent_workers=use_gpu)
'''


def test_a_worker_count_beside_what_needs_workers_or_read_elsewhere_stays(tmp_path: Path) -> None:
    """``prefetch_factor=`` and ``persistent_workers=True`` raise with no workers; ``**options`` may
    hold them; another callee or a call may do anything with the value; a walrus, an attribute or
    a module name carries the check to reads this file does not see."""
    kept_lines_stay(_write(tmp_path, "needs.py", _LOADERS_THAT_NEED_WORKERS), "TP003")


_DEVICE_BY_BRANCHES = '''
    import torch


    def pick():
        if torch.cuda.is_available():  # kept
            device = "cuda"
        else:
            device = "cpu"
        return torch.device(device)


    def pick_ranked(rank):
        if torch.cuda.is_available():  # kept
            device = f"cuda:{rank}"
        else:
            device = "cpu"
        return device


    def say():
        if torch.cuda.is_available():  # quiet
            message = "running on the GPU"
        else:
            message = "running without a GPU"
        print(message)
'''


def test_a_device_chosen_by_two_assignments_is_not_message_text(tmp_path: Path) -> None:
    path = _write(tmp_path, "pick.py", _DEVICE_BY_BRANCHES)
    check_marked_lines([path], (path,))


_TABLE = '''
    from dataclasses import dataclass, field


    @dataclass
    class BackendInfo:
        device: list = field(default_factory=list)
        priority: int = 0


    BACKENDS = {}
    BACKENDS["exllamav2"] = BackendInfo(device=["cuda"], priority=5)  # quiet
    BACKENDS["triton"] = BackendInfo(device=["cuda", "xpu"], priority=3)
    BACKENDS["torch"] = BackendInfo(device=["cpu", "cuda", "xpu", "mps"], priority=1)


    def pick(device):
        return next(name for name, info in BACKENDS.items() if device in info.device)


    def launch(start_worker):
        return start_worker(devices=["cuda"])  # kept


    def launch_on_cpu(start_worker):
        return start_worker(devices=["cpu"])


    def launch_first(start_worker):
        return start_worker(devices=["cpu"])


    PINNED = [BackendInfo(device=["cuda:0"]), BackendInfo(device=["cpu"]), BackendInfo(device=["xpu"])]  # kept
'''

_PLACEMENTS = '''
    class Placement:
        def __init__(self, devices):
            self.devices = devices

        def apply(self, model):
            return model.to(self.devices[0])


    ENCODER = Placement(devices=["cuda"])  # kept
    DECODER = Placement(devices=["cuda"])  # kept
    HEAD = Placement(devices=["cpu"])
    OFFLOAD = Placement(devices=["cuda", "cpu"])
'''


def test_cuda_in_a_capability_table_of_records_is_info(tmp_path: Path) -> None:
    """A record class with three entries is a table; a function called with device lists (even three
    times) or an indexed ``"cuda:0"`` names where work runs."""
    path = _write(tmp_path, "backends.py", _TABLE)
    check_marked_lines([path], (path,))
    severity, reason = worst_by_line(tmp_path)[("backends.py", 11, "TP001")]
    assert severity == "info" and reason.startswith("an entry of a capability table: other BackendInfo(device=...)")


def test_cuda_alone_in_a_list_without_a_table_stays_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "one.py", 'from .info import BackendInfo\nCUDA_ONLY = BackendInfo(device=["cuda"])\n')
    assert worst_by_line(tmp_path)[("one.py", 2, "TP001")][0] == "error"


def test_placements_no_membership_test_reads_stay_errors(tmp_path: Path) -> None:
    """Records that place work (``model.to(self.devices[0])``) look like a table, but nothing in the
    file asks whether a device is in them."""
    kept_lines_stay(_write(tmp_path, "placement.py", _PLACEMENTS), "TP001")


_DDP_TRAIN = '''
    import os

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP


    def setup():
        dist.init_process_group(backend="nccl")  # kept
        return int(os.environ["LOCAL_RANK"])


    def wrap(model, local_rank):
        model = model.to(f"cuda:{local_rank}")  # kept
        return DDP(model, device_ids=[local_rank])  # quiet
'''

_DDP_ALONE = '''
    from torch.nn.parallel import DistributedDataParallel as DDP


    def wrap(model, local_rank):
        return DDP(model, device_ids=[local_rank])  # kept
'''


_DDP_ELSEWHERE = '''
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP


    def setup(model):
        rank = int(os.environ["LOCAL_RANK"])
        device = torch.device(f"cuda:{rank}" if torch.cuda.is_available() else "cpu")
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        return DDP(model.to(device), device_ids=[rank])  # kept


    def benchmark_matmul():
        return torch.randn(1024, 1024, device="cuda")  # kept


    def maybe_cuda(x, use_cuda=False):
        if use_cuda:
            torch.cuda.set_device(0)
        return x


    def wrap(model, rank, device):
        return DDP(model.to(device), device_ids=[rank])  # kept
'''


def test_ddp_device_ids_with_the_tie_in_another_function_or_lowered_stay(tmp_path: Path) -> None:
    """Without CUDA ``setup`` puts the module on the CPU, where DDP refuses device_ids: the string
    in another function is not this path's tie, nor a ``set_device`` only an opt-in reaches."""
    kept_lines_stay(_write(tmp_path, "ddp.py", _DDP_ELSEWHERE))


def test_ddp_device_ids_after_the_cuda_tie_point_at_the_tie(tmp_path: Path) -> None:
    train = _write(tmp_path, "train.py", _DDP_TRAIN)
    alone = _write(tmp_path, "alone.py", _DDP_ALONE)
    check_marked_lines([train, alone], (train, alone))
    severity, reason = worst_by_line(tmp_path)[("train.py", 14, "TP004")]
    assert severity == "info"
    assert reason == ("DistributedDataParallel takes device_ids for a module on any one accelerator and refuses "
                      "them only for a module on the CPU: the choice that ties this path to CUDA is reported at "
                      "line 13")


def test_ddp_device_ids_keep_their_fix(tmp_path: Path) -> None:
    """Lowered, the finding still carries the fix that passes device_ids only off the CPU."""
    from torchport.scan.config import ScanConfig
    from torchport.scan.scanner import scan

    _write(tmp_path, "train.py", _DDP_TRAIN)
    found = next(f for f in scan([tmp_path], ScanConfig(), jobs=1).findings if f.rule_id == "TP004")
    assert found.fix is not None and found.severity_cap == "info"


# The second review's cases (1fcd4d2 lowered each of them).

_SECOND_REVIEW_CHOICES = '''
    import torch
    from torch.utils.data import DataLoader


    def pinned():
        return torch.device("cuda" if torch.cuda.is_available() else "cuda")  # kept


    def loader_without_gpu_workers(ds):
        return DataLoader(ds, batch_size=64, num_workers=0 if torch.cuda.is_available() else 4)  # kept


    def persistent_even_with_none(ds):
        workers = 4 if torch.cuda.is_available() else 0  # kept
        return DataLoader(ds, num_workers=workers, persistent_workers=workers >= 0)


    def no_count(ds):
        return DataLoader(ds, num_workers=4 if torch.cuda.is_available() else None)  # kept


    def handed_on_by_locals(ds, config):
        workers = 4 if torch.cuda.is_available() else 0  # kept
        config.update(locals())
        return DataLoader(ds, num_workers=workers)


    def positional_rest(ds, *args):
        return DataLoader(ds, *args, num_workers=4 if torch.cuda.is_available() else 0)  # kept


    def another_librarys_loader(graph, dgl, device):
        return dgl.dataloading.DataLoader(graph, num_workers=4 if torch.cuda.is_available() else 0,  # kept
                                          device=device)
'''


def test_the_second_reviews_choices_keep_their_severity(tmp_path: Path) -> None:
    """A device on both sides is the lock-in itself; more workers without CUDA (to keep forked workers
    off an initialised device), a count compared so it can be true with none, a count that is not a
    number, a count ``locals()`` hands on, ``*args`` that may carry ``multiprocessing_context``, and
    another library's loader are not only speed."""
    kept_lines_stay(_write(tmp_path, "choices.py", _SECOND_REVIEW_CHOICES), "TP003")


_NOT_TABLES = {
    "iterated.py": '''
        class Worker:
            def __init__(self, name, devices):
                self.devices = devices


        WORKERS = [Worker("a", devices=["cuda"]), Worker("b", devices=["cuda"]),  # kept
                   Worker("c", devices=["cuda", "cpu"])]


        def start(worker, model):
            if "cpu" in worker.devices:
                return model
            for device in worker.devices:
                model = model.to(device)
            return model
    ''',
    "other_field.py": '''
        class Stage:
            def __init__(self, device):
                self.device = device


        STAGES = [Stage(device=["cuda"]), Stage(device=["cuda"]), Stage(device=["cuda", "cpu"])]  # kept


        def place(stage, model, args):
            if "cuda" in args.device:
                return model.to(stage.device[0])
            return model
    ''',
}


def test_records_that_place_work_are_not_tables(tmp_path: Path) -> None:
    """A membership read does not make a table of a field that is also iterated or indexed to place
    work, nor a text match in a comment or a ``for`` loop."""
    for name, source in _NOT_TABLES.items():
        _write(tmp_path, name, source)
    found = worst_by_line(tmp_path)
    assert found[("iterated.py", 6, "TP001")][0] == "error"
    assert found[("other_field.py", 6, "TP001")][0] == "error"


_DDP_NOT_ON_THE_PATH = '''
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    class Trainer:
        def __init__(self, model, rank):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            self.model = DDP(model.to(device), device_ids=[rank])  # kept

        def profile_kernels(self):
            x = torch.randn(1024, 1024, device="cuda")  # kept
            return x @ x


    def wrap(model, rank):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        probe = torch.ones(1, device="cuda")  # kept
        return DDP(model.to(device), device_ids=[rank]), probe  # kept
'''


def test_a_cuda_string_off_the_module_path_is_not_the_ddp_tie(tmp_path: Path) -> None:
    """An uncalled helper of the class, or a probe beside the move, is not where the wrapped module
    was sent: without CUDA the module is on the CPU and DDP raises at device_ids."""
    kept_lines_stay(_write(tmp_path, "trainer.py", _DDP_NOT_ON_THE_PATH))

