"""A ``"cpu"`` the code only compares with is a test, not a fallback: ``tensor.device.type == "cpu" and device.type ==
"cuda"`` choosing a pinned, non-blocking copy.  A test of the device the code was given is info
there (torchtitan, nnunetv2, brevitas, dgl), and stays reported where the statement does move to
the CPU, or where the "cpu" is compared without a CUDA test beside it (kornia's lightglue, judge
837583's #058: ``if q.device.type == "cpu" and q.dtype == torch.float64:``, a branch of its own,
since a fourth review).  And ``torch.version.cuda``, the CUDA toolkit
torch was built with, is info where the statement chooses no device from it (a version in a
message, an order of kernels, a build report: 0 of the 10 judged so far were found right), and
stays reported where it does (``if torch.version.cuda: model = model.cuda()``, a backend, a
``set_device``, an import of an implementation) or may later (a flag stored or returned).
Shapes from an independent review of the first version."""
from __future__ import annotations

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write

_ADAPTS = """
    import torch
    import torch.nn.functional as F


    def attend(self, q, k, v, mask=None):
        # the "cpu" below is a branch of its own
        if self.allow_flash and q.device.type == "cuda":  # kept
            args = [x.half().contiguous() for x in [q, k, v]]
            return F.scaled_dot_product_attention(*args, attn_mask=mask).to(q.dtype)
        if q.device.type == "cpu" and q.dtype == torch.float64:
            return F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)).squeeze(0)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


    def to_device(tensor, device):
        if device.type == "cuda" and tensor.device.type == "cpu":  # quiet
            return tensor.pin_memory().to(device, non_blocking=True)
        return tensor.to(device)


    def copy_rows(src, index, tgt_device):
        if src.device.type == "cpu" and tgt_device.type == "cuda":  # quiet
            buffer = src.index_select(0, index).pin_memory()
        else:
            buffer = src.index_select(0, index).to(tgt_device)
        return buffer.to(tgt_device, non_blocking=True)


    def engine(tensor):
        if tensor.device.type == "cuda":  # quiet
            return "unfold"
        if tensor.device.type == "cpu":
            return "convolution"
        return "unfold"


    def mask_device(indices, labels):
        return indices.to("cuda" if labels.is_cuda else "cpu")  # kept


    def solve(boxes, costs):
        if boxes.device.type == "cuda":  # kept
            return assign_on_device(costs)
        return [cost.cpu() for cost in costs]


    def host_when_not_cuda(costs):
        if costs[0].device.type != "cuda":  # kept
            costs = [cost.to("cpu") for cost in costs]
        return costs
    """


def test_a_cpu_that_is_only_compared_with_is_no_fallback(tmp_path):
    path = _write(tmp_path, "ops.py", _ADAPTS)
    check_marked_lines([path], (path,))


_BUILD = """
    import torch


    class SummaryPrinter:
        def is_built_with_cuda(self) -> bool:
            # a flag its callers may choose a device by
            return torch.version.cuda is not None  # kept


    def install_hint() -> str:
        cuda_version = torch.version.cuda or "unknown"  # quiet
        return f"pip install nvfuser-cu{cuda_version}"


    def order(priority, inp):
        if torch.version.cuda and not inp.variable_length:  # quiet
            priority.appendleft("flash")
        return priority


    def place(model):
        if torch.version.cuda:  # kept
            model = model.cuda()
        return model


    def place_on(model, rank):
        if torch.version.cuda is not None:  # kept
            model.to(rank)
        return model


    def report():
        return [("CUDA", torch.version.cuda or "N/A"), ("major", (torch.version.cuda or "").split(".")[0])]  # quiet


    USE_CUDA = torch.version.cuda is not None  # kept


    def init(rank):
        if torch.version.cuda:  # kept
            torch.cuda.set_device(rank)
        torch.distributed.init_process_group(backend="nccl" if torch.version.cuda is not None else "gloo")  # kept
        if torch.version.cuda is not None:  # kept
            return DEVICE_CUDA
        return "xpu" if torch.version.cuda is None else "cpu"  # kept


    def implementation():
        if torch.version.cuda:  # kept
            from cuda_ops import op
        else:
            from cpu_ops import op
        return op
    """


def test_the_cuda_build_version_chooses_a_device_only_where_the_statement_names_one(tmp_path):
    path = _write(tmp_path, "build.py", _BUILD)
    check_marked_lines([path], (path,))


_MOVES = """
    def to_target(x, target):
        if x.is_cuda and target == "cpu":  # kept
            x = x.to(target)
        return x


    def pin(tensor, device):
        if device.type == "cuda" and tensor.device.type in ("cpu",):  # quiet
            return tensor.pin_memory().to(device, non_blocking=True)
        return tensor.to(device)
    """


def test_a_comparison_that_proves_the_cpu_then_moves_there_is_a_fallback(tmp_path):
    path = _write(tmp_path, "moves.py", _MOVES)
    check_marked_lines([path], (path,))
