"""A torch.library registration for CUDA alone (TP001) against the op's other kernels in the file.

``custom_op`` without ``device_types`` and ``impl(..., "default")`` give every device a kernel, so
a CUDA registration of the same op only replaces it for CUDA (info); a kernel for the CPU makes the
op work there (fine on cpu, still an error on the targets with none).  The snippets are run with the
installed CPU torch as well: what the scan says of the CPU is what torch does there."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from scan_marks import ALL_TARGETS
from scan_marks import write_snippet as _write
from torchport.scan.config import ScanConfig
from torchport.scan.rules import finding_severity, finding_worst
from torchport.scan.scanner import scan

# Shaped after optimum-quanto's qbytes_mm ("default" and "CUDA"), torch's own register_kernel
# example (a "cpu" op given a "cuda" kernel) and a Library object's impl for the CPU.
_OPS = """
    import torch
    from torch.library import custom_op

    lib = torch.library.Library("tpk", "DEF")
    lib.define("neg(Tensor x) -> Tensor")


    @custom_op("tpk::scale", mutates_args=())
    def scale(x: torch.Tensor) -> torch.Tensor:
        return x * 2


    @scale.register_kernel("cuda")  # everywhere
    def _(x):
        return x * 2


    @torch.library.impl("tpk::pack", "default")
    def pack_default(x):
        return x + 1


    torch.library.define("tpk::pack", "(Tensor x) -> Tensor")


    @torch.library.impl("tpk::pack", "CUDA")  # everywhere
    def pack_cuda(x):
        return x + 1


    @torch.library.custom_op("tpk::numpy_sin", mutates_args=(), device_types="cpu")
    def numpy_sin(x: torch.Tensor) -> torch.Tensor:
        return x.sin()


    @torch.library.register_kernel("tpk::numpy_sin", "cuda")  # cpu
    def _(x):
        return x.sin()


    @torch.library.impl(lib, "neg", "CUDA")  # cpu
    def neg_cuda(x):
        return -x


    def neg_cpu(x):
        return -x


    lib.impl("neg", neg_cpu, "CPU")


    @torch.library.custom_op("tpk::clip", mutates_args=(), device_types="cuda")  # everywhere
    def clip(x: torch.Tensor) -> torch.Tensor:
        return x.clamp(0, 1)


    @torch.library.register_kernel("tpk::clip", None)
    def _(x):
        return x.clamp(0, 1)


    @torch.library.custom_op("tpk::fused", mutates_args=(), device_types="cuda")  # nowhere
    def fused(x: torch.Tensor) -> torch.Tensor:
        return x * 3
    """

_RUN = """
import torch
import ops

x = torch.ones(2)
print(torch.ops.tpk.scale(x).tolist(), torch.ops.tpk.pack(x).tolist(), torch.ops.tpk.numpy_sin(x).shape[0],
      torch.ops.tpk.neg(x).tolist(), torch.ops.tpk.clip(x).tolist())
try:
    torch.ops.tpk.fused(x)
except NotImplementedError:
    print("fused: no CPU kernel")
"""


def _marked_registrations(tmp_path) -> dict[str, list]:
    """Scan the ops: the TP001 finding of each registration line, by the mark the line ends with."""
    path = _write(tmp_path, "ops.py", _OPS)
    result = scan([tmp_path], ScanConfig(), jobs=1)
    by_line = {f.line: f for f in result.findings if f.rule_id == "TP001"}
    marked: dict[str, list] = {}
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if text.startswith("@") and "# " in text:
            marked.setdefault(text.rsplit("# ", 1)[1], []).append(by_line[n])
    return marked


def test_a_cuda_kernel_beside_a_kernel_for_every_device_is_an_override(tmp_path):
    everywhere = _marked_registrations(tmp_path)["everywhere"]
    assert len(everywhere) == 3
    for finding in everywhere:
        assert finding_worst(finding, ALL_TARGETS) == "info", finding.line
        assert "a kernel that every device uses (line" in finding.cap_reason


def test_a_cuda_kernel_beside_a_cpu_kernel_is_fine_on_cpu_and_an_error_elsewhere(tmp_path):
    marked = _marked_registrations(tmp_path)
    assert len(marked["cpu"]) == 2
    for finding in marked["cpu"]:
        assert finding_severity(finding, "cpu") is None, finding.line
        assert {t: finding_severity(finding, t) for t in ("tpu", "xla", "mps")} == dict.fromkeys(
            ("tpu", "xla", "mps"), "error")
        assert "the op has its own kernel for cpu (line" in finding.detail
    (alone,) = marked["nowhere"]
    assert finding_severity(alone, "cpu") == "error" and "own kernel" not in alone.detail


def test_a_finding_fine_on_every_chosen_target_is_not_listed(tmp_path):
    marked = _marked_registrations(tmp_path)
    on_cpu = scan([tmp_path], ScanConfig(targets=["cpu"]), jobs=1)
    listed = {f.line: finding_worst(f, ["cpu"]) for f in on_cpu.findings if f.rule_id == "TP001"}
    assert not {f.line for f in marked["cpu"]} & set(listed)
    assert {n for n, severity in listed.items() if severity == "error"} == {f.line for f in marked["nowhere"]}


def test_torch_on_the_cpu_does_what_the_scan_says(tmp_path):
    """The ops the scan calls fine on cpu (or overridden for CUDA) run on the CPU torch; the op
    registered for CUDA alone has no CPU kernel."""
    _write(tmp_path, "ops.py", _OPS)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_RUN)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[2.0, 2.0] [2.0, 2.0] 2 [-1.0, -1.0] [1.0, 1.0]", "fused: no CPU kernel"]


def test_ops_of_other_names_do_not_lend_their_kernels(tmp_path):
    _write(tmp_path, "ops.py", """
        import torch


        @torch.library.custom_op("tpk2::a", mutates_args=())
        def a(x: torch.Tensor) -> torch.Tensor:
            return x


        @torch.library.custom_op("tpk2::b", mutates_args=(), device_types="cuda")
        def b(x: torch.Tensor) -> torch.Tensor:
            return x


        @torch.library.register_kernel("tpk2::c", "cpu")
        def c_cpu(x):
            return x


        @torch.library.register_kernel("tpk2::cc", "cuda")
        def cc_cuda(x):
            return x
        """)
    result = scan([tmp_path], ScanConfig(), jobs=1)
    registrations = [f for f in result.findings if f.rule_id == "TP001"]
    assert len(registrations) == 2
    assert all(finding_severity(f, "cpu") == "error" and not f.cap_reason for f in registrations)


# What the file does not surely give the op lends it no kernel (a review's probes): a Library whose
# own key is Meta, a library name bound twice, one op name in two factories, a CPU kernel under an
# `if` or in a lambda, and "DEFAULT", which torch refuses (only "default" means every device).
_NOT_SURELY = {
    "meta_key.py": """
        import torch

        lib = torch.library.Library("tpn1", "DEF")
        lib.define("fused(Tensor x) -> Tensor")
        meta_lib = torch.library.Library("tpn1", "IMPL", "Meta")


        def fused_meta(x):
            return torch.empty_like(x)


        meta_lib.impl("fused", fused_meta)


        @torch.library.impl(lib, "fused", "CUDA")
        def fused_cuda(x):
            return x
        """,
    "rebound.py": """
        import torch

        lib = torch.library.Library("tpn2a", "DEF")
        lib.define("neg(Tensor x) -> Tensor")
        lib.impl("neg", lambda x: -x, "CPU")
        lib = torch.library.Library("tpn2b", "DEF")
        lib.define("neg(Tensor x) -> Tensor")


        @torch.library.impl(lib, "neg", "CUDA")
        def neg_cuda(x):
            return -x
        """,
    "factories.py": """
        import torch


        def make_b():
            @torch.library.custom_op("tpn3::b", mutates_args=())
            def op(x: torch.Tensor) -> torch.Tensor:
                return x.clone()

            @op.register_kernel("cpu")
            def _(x):
                return x.clone()
            return op


        def make_a():
            @torch.library.custom_op("tpn3::a", mutates_args=(), device_types="cuda")
            def op(x: torch.Tensor) -> torch.Tensor:
                return x.clone()
            return op
        """,
    "conditional.py": """
        import os

        import torch


        @torch.library.custom_op("tpn4::mm", mutates_args=(), device_types="cuda")
        def mm(x: torch.Tensor) -> torch.Tensor:
            return x


        if os.getenv("TPN_DEBUG_CPU") == "1":
            @mm.register_kernel("cpu")
            def _(x):
                return x
        """,
    "deferred.py": """
        import torch

        lib = torch.library.Library("tpn6", "DEF")
        lib.define("neg(Tensor x) -> Tensor")


        def neg_cpu(x):
            return -x


        register_cpu = lambda: lib.impl("neg", neg_cpu, "CPU")


        @torch.library.impl(lib, "neg", "CUDA")
        def neg_cuda(x):
            return -x
        """,
}


def test_kernels_the_file_does_not_surely_register_lend_nothing(tmp_path):
    for name, source in _NOT_SURELY.items():
        _write(tmp_path, name, source)
    result = scan([tmp_path], ScanConfig(), jobs=1)
    registrations = {(Path(f.path).name, f.line): f for f in result.findings if f.rule_id == "TP001"}
    assert {name for name, _ in registrations} == set(_NOT_SURELY)
    for key, finding in registrations.items():
        assert finding_severity(finding, "cpu") == "error" and not finding.cap_reason, key
    run = "\n".join(f"import {name[:-3]}" for name in _NOT_SURELY) + """
import torch
import factories
x = torch.ones(2)
for call in (torch.ops.tpn1.fused, torch.ops.tpn2b.neg, factories.make_a(), torch.ops.tpn4.mm, torch.ops.tpn6.neg):
    try:
        call(x)
    except NotImplementedError:
        print("no CPU kernel")
"""
    done = subprocess.run([sys.executable, "-c", run], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["no CPU kernel"] * 5


def test_only_default_spelled_so_means_every_device(tmp_path):
    _write(tmp_path, "ops.py", """
        import torch

        torch.library.define("tpn5::u", "(Tensor x) -> Tensor")


        @torch.library.impl("tpn5::u", "DEFAULT")
        def u_any(x):
            return x.clone()


        @torch.library.impl("tpn5::u", "cuda")
        def u_cuda(x):
            return x.clone()
        """)
    (finding,) = [f for f in scan([tmp_path], ScanConfig(), jobs=1).findings if f.rule_id == "TP001"]
    assert finding_worst(finding, ALL_TARGETS) == "error" and not finding.cap_reason
    done = subprocess.run([sys.executable, "-c", "import ops"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0 and "DEFAULT" in done.stderr  # torch refuses the spelling
