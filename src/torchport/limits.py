"""Limits shared by several commands, each defined once.

A number that two modules must agree on lives here (imports nothing, so any
module may use it); a limit that only one module uses stays in that module.
"""
from __future__ import annotations

# Seconds before a worker process (or torchrun) is killed: the default of
# `evaluate --timeout` and `check --timeout`, and the most a stage started from
# evaluate (script mode) gives one worker.
DEFAULT_TIMEOUT_S = 600.0
# Seconds before `trace` stops and keeps what it traced: tracing runs a few
# steps on the CPU, so it gets less than a measured run.
TRACE_TIMEOUT_S = 300.0

# Shares of step time spent waiting for data: below KEEPS_UP_SHARE the input
# pipeline keeps up, above INPUT_BOUND_SHARE the app is input-bound, between
# the two it is borderline (a band, so that noise near one threshold cannot flip
# the verdict).  Evaluate's summary and check's pipeline check agree on them.
KEEPS_UP_SHARE = 0.15
INPUT_BOUND_SHARE = 0.25

# A 1-minute load average above this many runnable tasks per CPU means a
# timing shared the cores with other work: check's pipeline verdict is marked
# uncertain and script mode flags a speed as measured under heavy load.  Above
# 1.0 because the measurement fills the cores by itself (one intra-op thread per
# CPU, plus the app's DataLoader workers), so an idle machine reads about 1.0
# per CPU while it runs; 1.5 is that plus half the cores' worth of other work.
HEAVY_LOAD_PER_CPU = 1.5

# Caps on text that comes from apps and workers before it enters a result.
MESSAGE_CHARS = 500
TAIL_LINES = 20  # lines of a worker's stderr/stdout kept in the result
TAIL_LINE_CHARS = 300
TRACEBACK_CHARS = 8000
# Of those, the lines a report shows under a failed backend.
REPORT_TAIL_LINES = 10
