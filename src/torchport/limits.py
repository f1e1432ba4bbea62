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

# Caps on text that comes from apps and workers before it enters a result.
MESSAGE_CHARS = 500
TAIL_LINES = 20  # lines of a worker's stderr/stdout kept in the result
TAIL_LINE_CHARS = 300
TRACEBACK_CHARS = 8000
# Of those, the lines a report shows under a failed backend.
REPORT_TAIL_LINES = 10
