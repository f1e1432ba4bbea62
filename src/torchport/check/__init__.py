"""``torchport check``: does the app still learn the same thing, and does the
rest of a training job (checkpoints, crash recovery, distributed training, the
input pipeline) survive the move?

Layout, parent side first:

* ``runner``: runs the requested checks on the requested backends and returns
  the ``checks`` section of the result document;
* ``parity``, ``checkpoint``, ``recovery``, ``distributed``, ``pipeline``: one
  module per check; each judges figures that workers measured;
* ``tolerance``: the error-ratio rule and the thresholds every check uses;
* ``stage``: the cheap subset that ``torchport evaluate`` runs;
* ``report``: the markdown section.

Worker side (runs in a backend's own process, on torch 2.9 or newer):

* ``jobs``: the job functions started through ``torchport.launch.run_worker``
  (and, for distributed training, through ``torchrun``);
* ``training``: one seeded training run of an app, with what the checks record;
* ``savefile``: checkpoint files with a size and checksum beside them, never
  loaded before they are validated.
"""
from __future__ import annotations

CHECK_NAMES = ("parity", "checkpoint", "recovery", "distributed", "pipeline")
