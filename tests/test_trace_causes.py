"""torchport trace points at the cause: construction is traced too (the model,
optimizer and data factories run in the tracing worker with the construction
recorder on), so a finding about a partial batch, float64 or tile waste names
the line that caused it and keeps the step line where it showed up
(``seen_at``).  Each app is a real app traced in a real worker; every cause
line is asserted exactly.  Also the contract ergonomics: an optimizer factory
that expects parameters, a data factory that hands out one spent iterator, a
model not built in float32."""
from __future__ import annotations

from pathlib import Path

import pytest

from torchport.app import App, make_optimizer
from torchport.errors import UserError
from torchport.trace.analysis import trace_app
from tests.test_trace import APPS, marked_line


def trace(app: str, **options) -> dict:
    section = trace_app(str(APPS / app), allow_live=False, **options).to_dict()
    assert section["status"] == "complete", section["reason"]
    return section


def by_location(section: dict, rule: str) -> dict[str, dict]:
    return {f["location"]: f for f in section["findings"] if f["id"] == rule}


def test_partial_last_batch_points_at_the_dataloader_line():
    section = trace("cause_partial_batch.py")
    [finding] = section["findings"]
    assert finding["id"] == "TR103" and finding["last_partial_batch"]
    assert finding["location"] == marked_line("cause_partial_batch.py", "DataLoader")
    # The step line where it showed up: the data factory that yielded the batches.
    assert finding["seen_at"] == [f"{APPS / 'cause_partial_batch.py'}:10"]
    assert finding["cause"] == {"kind": "data-loader", "code": "return DataLoader(dataset, batch_size=32)  # the DataLoader"}
    assert "batch_size=32, drop_last=False over 100 samples leaves a last batch of 4" in finding["detail"]
    [loader] = section["construction"]["data_loaders"]
    assert (loader["batch_size"], loader["drop_last"], loader["dataset_length"]) == (32, False, 100)


def test_float64_points_at_double_and_at_the_data_line():
    section = trace("cause_double.py")
    found = by_location(section, "TR105")
    double, data = marked_line("cause_double.py", "double"), marked_line("cause_double.py", "float64 data")
    assert set(found) == {double, data}
    model = found[double]
    assert model["cause"] == {"kind": "model-dtype", "code": "return net.double()  # the double"}
    assert model["seen_at"] == [marked_line("cause_double.py", "step line")]
    assert "aten::addmm" in model["ops"] and model["count"] > 0
    assert found[data]["cause"]["kind"] == "data-dtype" and found[data]["count"] == 3
    construction = section["construction"]
    assert construction["model_dtype"] == "float64"
    assert {(c["call"], c["from"], c["to"], c["location"]) for c in construction["dtype_changes"]} >= {
        ("Tensor.double()", "float32", "float64", double), ("torch.from_numpy()", None, "float64", data)}
    # The model is not float32: flagged against the app contract at the same line.
    [note] = section["contract"]
    assert (note["problem"], note["dtype"], note["location"]) == ("model-dtype", "float64", double)


def test_odd_layer_sizes_point_at_the_constructor_lines():
    section = trace("cause_layer_sizes.py", targets=["tpu", "xla"])
    found = by_location(section, "TR106")
    first, second = (marked_line("cause_layer_sizes.py", f"{which} odd layer") for which in ("first", "second"))
    assert set(found) == {first, second}
    assert found[first]["cause"] == {"kind": "module-constructor", "code": "self.up = nn.Linear(128, 37)  # the first odd layer"}
    assert found[first]["modules"] == ["up"] and found[second]["modules"] == ["down"]
    for finding in found.values():
        assert finding["seen_at"] == [marked_line("cause_layer_sizes.py", "step line")]
        assert "library_location" not in finding


def test_a_layer_built_by_a_library_names_the_library_line_and_the_users_call():
    section = trace("cause_library_layer.py", targets=["tpu", "xla"])
    user_call = marked_line("cause_library_layer.py", "library call")
    built = [f for f in section["findings"] if f["id"] == "TR106" and f.get("library_location")]
    assert built, [(f["location"], f.get("library_location")) for f in section["findings"]]
    import torch.nn.modules.transformer as transformer

    lines = Path(transformer.__file__).read_text().splitlines()
    for finding in built:
        assert finding["location"] == user_call and finding["library"] == "torch"
        path, line = finding["library_location"].rsplit(":", 1)
        assert path == "torch/nn/modules/transformer.py"
        # The library line is the constructor call of the layer that wastes.
        assert "Linear(" in lines[int(line) - 1] or "MultiheadAttention(" in lines[int(line) - 1]
        assert finding["seen_at"] == [marked_line("cause_library_layer.py", "step line")]
    assert {m for f in built for m in f["modules"]} >= {"linear1", "linear2", "self_attn"}


def test_a_model_not_in_float32_is_recorded_and_flagged():
    section = trace("contract_bfloat16.py")
    assert section["construction"]["model_dtype"] == "bfloat16"
    [note] = section["contract"]
    assert (note["dtype"], note["location"]) == ("bfloat16", marked_line("contract_bfloat16.py", "bfloat16"))


def test_an_optimizer_factory_that_expects_parameters_works():
    section = trace("contract_optimizer_params.py")
    assert section["memory"]["parts"]["optimizer_state"] > 0  # AdamW's moments: it really stepped


def test_make_optimizer_reports_the_first_error_when_parameters_do_not_help():
    import torch

    def broken(model):
        raise TypeError("the app's own bug")

    app = App(model=lambda: torch.nn.Linear(2, 2), data=list, loss=lambda m, b: None, optimizer=broken)
    with pytest.raises(UserError) as caught:
        make_optimizer(app, torch.nn.Linear(2, 2))
    assert "TypeError: the app's own bug" in str(caught.value)
    assert caught.value.location == f"{__file__}:{broken.__code__.co_firstlineno + 1}"


def test_a_data_factory_that_hands_out_one_iterator_is_caught_at_its_line():
    section = trace_app(str(APPS / "contract_spent_iterator.py"), allow_live=False).to_dict()
    assert section["status"] == "failed"
    assert section["error"]["location"] == marked_line("contract_spent_iterator.py", "spent iterator")
    assert "returns the same list_iterator on every call" in section["error"]["message"]


def test_the_timed_run_names_the_data_factory_when_an_epoch_is_empty():
    from torchport.engine import BatchStream

    spent = iter([1])
    factory = lambda: spent  # noqa: E731
    stream = BatchStream(factory)
    stream.next()
    with pytest.raises(UserError) as caught:
        stream.next()
    assert caught.value.location == f"{__file__}:{factory.__code__.co_firstlineno}"
