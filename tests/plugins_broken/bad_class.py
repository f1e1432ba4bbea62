"""Test-only: a backend plugin that defines a backend under a name already taken
by a built-in backend (tests/test_backends_plugins.py)."""
from torchport.backends.cpu import CPU


class SecondCPU(CPU):
    name = "cpu"
    title = "a second backend named cpu"
