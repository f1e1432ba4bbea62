"""Data that is slow to produce: an input-bound app.  A generator factory (no len)."""
import time

from spine_common import batches, tiny_app


def slow_batches():
    for batch in batches(count=4):
        time.sleep(0.01)
        yield batch


def app():
    return tiny_app(data=slow_batches)
