"""Prices: every way a price is given is checked by one module into Price records."""
from __future__ import annotations

import pytest

from torchport.errors import UserError
from torchport.prices import (
    Price, Prices, PriceSource, config_prices, load_price_file, parse_machine_price, parse_price, price_value,
)


def test_flag_file_and_config_prices_are_the_same_record(tmp_path):
    price_file = tmp_path / "prices.toml"
    price_file.write_text("[prices]\ncpu = 0.2\n")
    assert parse_price(" cpu = 0.2") == Price("cpu", 0.2, PriceSource.FLAG)
    assert load_price_file(price_file) == [Price("cpu", 0.2, PriceSource.FILE)]
    top_level = tmp_path / "top.toml"
    top_level.write_text("cuda = 2\n")
    assert load_price_file(top_level) == [Price("cuda", 2.0, PriceSource.FILE)]
    assert config_prices({"cpu": 1}, "pyproject.toml:tool.torchport.prices") == [Price("cpu", 1.0, PriceSource.CONFIG)]


def test_later_prices_replace_earlier_ones_in_place():
    prices = Prices().add(config_prices({"cpu": 0.1, "cuda": 2.5}, "config"))
    prices = prices.add([parse_price("cpu=0.3")])
    assert prices.to_dict() == {"cpu": 0.3, "cuda": 2.5}  # cpu keeps its place: the document's key order
    assert prices.get("cpu") == Price("cpu", 0.3, PriceSource.FLAG)
    assert prices.usd_per_hour("mps") is None
    assert prices.as_arguments() == ["--price=cpu=0.3", "--price=cuda=2.5"]
    assert all(parse_price(text.removeprefix("--price=")) for text in prices.as_arguments())


def test_a_documents_prices_read_back_as_result_file_prices():
    prices = Prices.from_document({"prices": {"cpu": 0.5}})
    assert prices.get("cpu") == Price("cpu", 0.5, PriceSource.RESULT)
    assert prices.get("cpu").source.value == "result file"  # compare writes this word
    assert Prices.from_document({}).to_dict() == {}


def test_compare_prices_name_a_machine():
    assert parse_machine_price("gpu box:cuda=2") == ("gpu box", Price("cuda", 2.0, PriceSource.FLAG))
    with pytest.raises(UserError, match="expected MACHINE:BACKEND"):
        parse_machine_price("cuda=2")


@pytest.mark.parametrize("value, problem", [
    ("free", "not a number"), (True, "not a number"), (None, "not a number"), ("1e400", "positive"),
    ("nan", "positive"), (0, "positive"), (-1, "positive"), (2e6, "above 1,000,000"),
])
def test_bad_prices_are_refused_where_they_were_given(value, problem):
    with pytest.raises(UserError, match=problem) as caught:
        price_value(value, "prices.toml: cpu")
    assert caught.value.location == "prices.toml: cpu"


@pytest.mark.parametrize("text", ["cpu", "=1", " =1", "cpu=x"])
def test_bad_price_flags(text):
    with pytest.raises(UserError, match="invalid price"):
        parse_price(text)


@pytest.mark.parametrize("content, problem", [
    (b"cpu = \n", "invalid TOML"), (b"prices = 3\n", "expected a [prices] table"), (b"\xff = 1\n", "not UTF-8"),
])
def test_bad_price_files(tmp_path, content, problem):
    path = tmp_path / "prices.toml"
    path.write_bytes(content)
    with pytest.raises(UserError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        load_price_file(path)
    with pytest.raises(UserError, match="not found"):
        load_price_file(tmp_path / "missing.toml")
