from torch import nn

from spine_common import tiny_app


def broken_model():
    return nn.Linear(8, "one")  # line 7: TypeError inside the model factory


def app():
    return tiny_app(model=broken_model)
