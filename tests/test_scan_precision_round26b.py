"""Round 26 after a second independent review: ``torch.version.cuda`` stays reported where the
statement keeps a device by a name (``GPU``, ``move_to_cuda``, ``opts.gpu``), stores a count,
loads an implementation (``importlib.import_module``, ``cpp_extension.load``), exits (an ``if``
that returns), or reads the version in a way that fails where it is None (torch built
without CUDA: ``.split``, ``float``, ``version.parse``, ``in``) outside a test that it is set.  A
comparison with the CPU of a variable the statement then places work by is a fallback, whatever
its form (``in ("cpu",)``, ``.type == "cpu"``, ``str(...)``, ``!=``, ``torch.device(target)``,
``device=target``)."""
from __future__ import annotations

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_BUILD = """
    import importlib

    import torch
    from packaging import version
    from torch.utils import cpp_extension

    GPU = "cuda"  # kept


    def pick():
        if torch.version.cuda is not None:  # kept
            return GPU
        return None


    def move(model):
        if torch.version.cuda:  # kept
            model = move_to_cuda(model)
        return model


    def setup(opts):
        if torch.version.cuda:  # kept
            opts.gpu = 0


    def count():
        gpus = 0
        if torch.version.cuda:  # kept
            gpus = 1
        return gpus


    def load_ops():
        if torch.version.cuda:  # kept
            ops = importlib.import_module("ops_cuda")
            ops.register()


    def build():
        if torch.version.cuda:  # kept
            fused = cpp_extension.load("fused", ["fused.cu"])
            fused.init()


    def load_or_skip():
        if torch.version.cuda is None:  # kept
            return
        load_ext("fused")


    def major():
        return int(torch.version.cuda.split(".")[0])  # kept


    def parsed():
        return version.parse(torch.version.cuda) >= version.parse("11.0")  # kept


    def newer():
        kernels = ["unfold"]
        if float(torch.version.cuda) >= 11:  # kept
            kernels.append("implicit_gemm")
        return kernels


    def eleven():
        print("11" in torch.version.cuda)  # kept


    def banner(logger):
        print(f"CUDA {torch.version.cuda}")  # quiet
        logger.info("built with CUDA %s", torch.version.cuda)  # quiet
        return {"torch": torch.__version__, "cuda_version": torch.version.cuda}  # quiet


    def guarded_major():
        if torch.version.cuda is not None:  # quiet
            print("major", torch.version.cuda.split(".")[0])  # quiet
        # returned, a value for later
        return torch.version.cuda and torch.version.cuda.split(".")[0]  # kept
    """


def test_the_build_version_stays_reported_where_the_statement_keeps_loads_exits_or_fails_on_none(tmp_path):
    path = _write(tmp_path, "build.py", _BUILD)
    check_marked_lines([path], (path,))


_MOVES = """
    import torch


    def listed(x, target):
        if x.is_cuda and target in ("cpu",):  # kept
            x = x.to(target)
        return x


    def typed(x, target):
        if x.is_cuda and target.type == "cpu":  # kept
            x = x.to(target)
        return x


    def named(x, target):
        if x.is_cuda and str(target) == "cpu":  # kept
            x = x.to(torch.device(target))
        return x


    def allocated(x, target, like):
        if x.is_cuda and target == "cpu":  # kept
            x = torch.empty_like(like, device=target)
        return x


    def otherwise(x, target):
        if x.is_cuda and target != "cpu":  # kept
            pass
        else:
            x = x.to(target)
        return x


    def pinned(tensor, device):
        if device.type == "cuda" and tensor.device.type == "cpu":  # quiet
            return tensor.pin_memory().to(device, non_blocking=True)
        return tensor.to(device)
    """


def test_any_comparison_with_the_cpu_of_a_variable_the_statement_places_by_is_a_fallback(tmp_path):
    path = _write(tmp_path, "moves.py", _MOVES)
    check_marked_lines([path], (path,))


# From a third independent review: a branch of its own for the CPU is no side test; what the
# check guards may fail (an error outranks the cap); more reads that fail on None; a library, a
# flag set by a call or an `assert False` chosen by the build.
_THIRD = """
    import ctypes
    import os
    import subprocess

    import torch


    def rms_norm(x, weight, eps=1e-6):
        # on an XPU tensor `out` is never bound
        if x.is_cuda:  # kept
            out = fused_rms_norm(x, weight, eps)
        elif x.device.type == "cpu":
            out = reference_rms_norm(x, weight, eps)
        return out


    def rms_norm_or_raise(x, weight, eps=1e-6):
        if x.is_cuda:  # kept
            return fused_rms_norm(x, weight, eps)
        if x.device.type == "cpu":
            return reference_rms_norm(x, weight, eps)
        raise NotImplementedError(f"rms_norm: unsupported device {x.device}")


    def rope(x, cos, sin):
        # `impl` is unbound elsewhere
        if x.is_cuda and cos.device.type != "cpu":  # kept
            impl = fused_rope
        return impl(x, cos, sin)


    def cuda_major():
        # `parts` is unbound where it is None
        if torch.version.cuda:  # kept
            parts = torch.version.cuda.split(".")
        return int(parts[0])


    def set_arch_list():
        if torch.version.cuda is not None:  # kept
            arch = "7.0;8.0;8.6;9.0"
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch


    def load_native(pkg_dir):
        return ctypes.CDLL(os.path.join(pkg_dir, f"libkernels_cu{torch.version.cuda}.so"))  # kept


    def load_ops(here):
        torch.ops.load_library(os.path.join(here, f"_C_cu{torch.version.cuda}.so"))  # kept


    def build_tag():
        return "+".join([torch.__version__.split("+")[0], torch.version.cuda])  # kept


    def show_versions(path):
        print("{:<12}{:>10}".format("toolkit", torch.version.cuda))  # kept
        print(f"{'CUDA toolkit':<16}{torch.version.cuda:>10}")  # kept
        with open(path, "w") as f:
            f.write(torch.version.cuda)  # kept
        subprocess.check_call(["make"], env={**os.environ, "TORCH_CUDA_VERSION": torch.version.cuda})  # kept
        return int(str(torch.version.cuda).split(".")[0])  # kept


    def configure(parser, cfg):
        if torch.version.cuda is None:  # kept
            parser.set_defaults(fp16=False, num_workers=0)
        if not torch.version.cuda:  # kept
            setattr(cfg, "use_flash_attn", False)
        if torch.version.cuda is None:  # kept
            assert False, "a CUDA build of PyTorch is required"
        run()


    class Prefetcher:
        def next(self):
            if self.batch.device.type == "cpu" and self.device.type == "cuda":  # quiet
                self.batch = self.batch.to(self.device, non_blocking=True)
            return self.batch
    """


def test_a_cpu_branch_a_guarded_failure_and_reads_that_fail_on_none_stay_reported(tmp_path):
    path = _write(tmp_path, "third.py", _THIRD)
    check_marked_lines([path], (path,))


# From a fourth independent review: a check capped before round 26 stays as it was, whatever its
# line says ("cpu" in a name or a comment); a "cpu" compared without a CUDA test beside it is a
# branch of its own; a subscripted device is one value on both sides.
_FOURTH = """
    import torch


    def rope_offload(x, cos, cpu_offload):
        # info before the round, and left so
        if x.is_cuda and not cpu_offload:  # quiet
            impl = fused_rope
        return impl(x, cos)


    def rope_commented(x, cos):
        # skip on cpu
        if x.is_cuda:  # quiet
            impl = fused_rope
        return impl(x, cos)


    def rope_beside_cpu(x, cos):
        # `impl` is unbound elsewhere
        if x.is_cuda and cos.device.type != "cpu":  # kept
            impl = fused_rope
        return impl(x, cos)


    def norm(x, training):
        # an XPU tensor reaches no branch
        if x.is_cuda:  # kept
            out = fused(x)
        elif x.device.type == "cpu" and not training:
            out = ref(x)
        return out


    def to_first(self, x):
        # moves to the CPU
        if x.is_cuda and self.devices[0].type == "cpu":  # kept
            x = x.to(self.devices[0])
        return x
    """


def test_caps_from_before_the_round_stay_and_a_cpu_branch_in_an_and_is_a_branch(tmp_path):
    path = _write(tmp_path, "fourth.py", _FOURTH)
    check_marked_lines([path], (path,))
