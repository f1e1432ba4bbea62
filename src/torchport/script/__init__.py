"""Script mode: an unmodified training script, measured on every backend.

``torchport evaluate --script train.py -- --device={device}`` runs the user's
own script in each backend's worker (``job``), with its own ``sys.argv``,
working directory and ``__main__``.  Step boundaries come from the global
optimizer-step hooks, the loss from the scalar handed to ``backward()``, and
the timing protocol is the same as for apps.  ``redirect`` holds the table
that points a CUDA-written script at another backend, logging every redirect
at the user's line.
"""
