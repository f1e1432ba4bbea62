"""Built-in apps, addressed as ``builtin:NAME``.  Each makes its synthetic data
in process from a fixed seed: nothing is downloaded."""
