"""Static CUDA lock-in scanner and fixer (``torchport scan``, ``fix``, ``rules``).

Read in this order: ``rules`` (the catalogue), ``python`` (what of a Python file is
parsed), ``detectors/`` (how Python code is matched and which edits fix it: a
walking core and one module per rule family), ``scanner`` (files, parallelism, filtering),
``fixer`` (applying edits), ``report`` (summary, score, text/JSON/SARIF),
``config``, ``textfiles`` and ``packages`` (non-Python inputs).
"""
from torchport.scan.rules import RULES, RULES_BY_ID, TARGETS

__all__ = ["RULES", "RULES_BY_ID", "TARGETS"]
