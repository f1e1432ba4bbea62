"""A boolean-mask index over a small dataset that repeats every epoch.

``error[target > 0]`` has a data-dependent shape: torch_xla runs
``aten::nonzero`` and compiles one graph per distinct count of selected
elements.  The 8 batches repeat, so all those graphs are compiled in the first
epoch (warm-up) and the sustained phase looks clean.  The trace of two steps
sees one input shape and predicts one step graph: the measured run must be
reported as disagreeing, and the warm-up as recompiling.
"""

from trace_common import make_app

BATCHES = 8


def data():
    from trace_common import batches

    return batches(count=BATCHES)


def loss(net, batch):
    features, target = batch
    error = (net(features) - target) ** 2
    return error[target > 0].mean()  # MASK: the data-dependent shape


def app():
    return make_app(loss, data=data)
