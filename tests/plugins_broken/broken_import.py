"""Test-only: a backend plugin whose import fails (tests/test_backends_plugins.py)."""
import torchport_no_such_module  # noqa: F401
