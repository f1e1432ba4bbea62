"""Values several rule families share: the name of the device line that fixes
insert, the device-string patterns, and the reasons printed for lowered findings."""
from __future__ import annotations

import re

# The module-level variable that `torchport fix` inserts and rewrites refer to.
DEVICE_NAME = "ACCELERATOR_DEVICE"
# The module-level function that `torchport fix` inserts for `.cuda(index)`.
HELPER_NAME = "accelerator_device"
# A rewrite that runs on every torch release.
ANY_VERSION = "0"
CUDA_DEVICE = re.compile(r"cuda(?::(\d+))?\Z")
# A file that only a test runner executes: under a tests/ folder, test_*.py, *_test.py,
# conftest.py, or an editor's backup of one (flycheck_test_utils.py).
_TEST_FILE = re.compile(r"(^|/)(tests?|testing)/|(^|/)(flycheck_)?(test_[^/]*|[^/]*_test|conftest)\.py$")
OTHER_DEVICE_STRING = re.compile(r"(?:mps|xpu|xla|tpu|npu|hpu|mlu|musa|neuron|meta|cpu)(?::\d+)?\Z")
# What a TP001 finding at a torch.library registration for CUDA alone says after the device string.
CUDA_ONLY_KERNEL = "a torch.library kernel for CUDA alone"
GUARDED = "inside a CUDA check: runs only where CUDA is present"
LISTS_OTHERS = "the check lists other accelerators too"
SKIPPED_TEST = "inside a test skipped where CUDA is absent"
# Caps of a check that chooses no device; the last two (round 26's) policy.py reads again, as
# what the check guards may still fail without CUDA.
ADAPTS_TO_DEVICE = ("a test of the device the code was given: the code adapts to it (a fast path, an early "
                    "return), choosing no device")
ADAPTS_BESIDE_A_CPU_TEST = ADAPTS_TO_DEVICE + "; the \"cpu\" beside it is only tested"
BUILD_FACT = ("asks which CUDA toolkit torch was built with, a fact of the build (a version, a message, an "
              "order of kernels), and the statement chooses no device from it")
# Reasons meaning the code runs only where CUDA is present: a rewrite there needs
# no availability guard of its own.
CUDA_ONLY = (GUARDED, SKIPPED_TEST)


def is_test_file(path: str) -> bool:
    return bool(_TEST_FILE.search(path.replace("\\", "/")))
