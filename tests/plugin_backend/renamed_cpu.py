"""Test-only: a whole new backend in one module, found through TORCHPORT_BACKEND_PATH
(tests/test_backends_plugins.py).  It runs on the CPU under its own name; nothing
else in torchport names it."""
from torchport.backends.cpu import CPU


class PluginCPU(CPU):
    name = "plugin-cpu"
    title = "CPU, from a test-only plugin module"
    verification = "test-only backend"
