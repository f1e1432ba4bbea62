"""A torch.library registration for CUDA alone (TP001) against the op's other kernels in the file.

``custom_op`` without ``device_types`` and ``impl(..., "default")`` give every device a kernel, so
a CUDA registration of the same op only replaces it for CUDA (info); a kernel for the CPU makes the
op work there (fine on cpu, still an error on the targets with none).  The snippets are run with the
installed CPU torch as well: what the scan says of the CPU is what torch does there."""
from __future__ import annotations

import subprocess
import sys
import textwrap

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


def _registrations(tmp_path):
    path = _write(tmp_path, "ops.py", _OPS)
    lines = path.read_text().splitlines()
    result = scan([tmp_path], ScanConfig(), jobs=1)
    by_line = {f.line: f for f in result.findings if f.rule_id == "TP001"}
    marked = {n: text.rsplit("# ", 1)[1] for n, text in enumerate(lines, 1) if text.startswith("@") and "# " in text}
    return by_line, marked


def test_a_cuda_kernel_beside_a_kernel_for_every_device_is_an_override(tmp_path):
    by_line, marked = _registrations(tmp_path)
    for line in [n for n, mark in marked.items() if mark == "everywhere"]:
        finding = by_line[line]
        assert finding_worst(finding, ALL_TARGETS) == "info", line
        assert "a kernel that every device uses (line" in finding.cap_reason


def test_a_cuda_kernel_beside_a_cpu_kernel_is_fine_on_cpu_and_an_error_elsewhere(tmp_path):
    by_line, marked = _registrations(tmp_path)
    cpu_served = [n for n, mark in marked.items() if mark == "cpu"]
    assert len(cpu_served) == 2
    for line in cpu_served:
        finding = by_line[line]
        assert finding_severity(finding, "cpu") is None, line
        assert {t: finding_severity(finding, t) for t in ("tpu", "xla", "mps")} == dict.fromkeys(
            ("tpu", "xla", "mps"), "error")
        assert "the op has its own kernel for cpu (line" in finding.detail
    (alone,) = [n for n, mark in marked.items() if mark == "nowhere"]
    assert finding_severity(by_line[alone], "cpu") == "error" and "own kernel" not in by_line[alone].detail


def test_a_finding_fine_on_every_chosen_target_is_not_listed(tmp_path):
    _write(tmp_path, "ops.py", _OPS)
    on_cpu = scan([tmp_path], ScanConfig(targets=["cpu"]), jobs=1)
    by_line, marked = _registrations(tmp_path)
    listed = {f.line: finding_worst(f, ["cpu"]) for f in on_cpu.findings if f.rule_id == "TP001"}
    assert not {n for n, mark in marked.items() if mark == "cpu"} & set(listed)
    assert {n for n, severity in listed.items() if severity == "error"} == {
        n for n, mark in marked.items() if mark == "nowhere"}


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
