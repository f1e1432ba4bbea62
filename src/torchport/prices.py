"""Prices: what an hour of one backend costs, in USD.

A price is given as ``--price BACKEND=USD_PER_HOUR``, in a TOML price file, in
the ``prices`` table of the project configuration, or (for ``compare``) as
``--price MACHINE:BACKEND=USD_PER_HOUR``; a result document keeps the prices
its evaluation was given.  Every one of them is checked here, the same way,
into ``Price`` records.
"""
from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from torchport.errors import UserError

# A price above this is a typing error, and would overflow the cost figures.
MAX_PRICE_USD_PER_HOUR = 1e6


class PriceSource(StrEnum):
    """Where a price was read; the words are the ones ``compare`` writes as ``price_source``."""

    FLAG = "--price"
    FILE = "price file"
    CONFIG = "config"
    RESULT = "result file"


@dataclass(frozen=True)
class Price:
    backend: str
    usd_per_hour: float
    source: PriceSource


@dataclass
class Prices:
    """One price per backend; a later price of the same backend replaces the earlier one."""

    by_backend: dict[str, Price] = field(default_factory=dict)

    @classmethod
    def of(cls, table: Mapping[str, float], source: PriceSource) -> Prices:
        return cls({name: Price(name, usd, source) for name, usd in table.items()})

    @classmethod
    def from_document(cls, document: Mapping[str, object]) -> Prices:
        """The prices a result document was evaluated with (written checked; read as they are)."""
        table = document.get("prices") or {}
        assert isinstance(table, dict)
        return cls.of(table, PriceSource.RESULT)

    def add(self, prices: Iterable[Price]) -> Prices:
        merged = dict(self.by_backend)
        merged.update((price.backend, price) for price in prices)
        return Prices(merged)

    def get(self, backend: str) -> Price | None:
        return self.by_backend.get(backend)

    def usd_per_hour(self, backend: str) -> float | None:
        price = self.by_backend.get(backend)
        return price.usd_per_hour if price is not None else None

    def backends(self) -> list[str]:
        return list(self.by_backend)

    def to_dict(self) -> dict[str, float]:
        """The ``prices`` object of the result document."""
        return {name: price.usd_per_hour for name, price in self.by_backend.items()}

    def as_arguments(self) -> list[str]:
        """The same prices as ``--price`` arguments (handed to a remote evaluation)."""
        return [f"--price={name}={price.usd_per_hour}" for name, price in self.by_backend.items()]


def price_value(value: object, where: str) -> float:
    """A positive, finite number of USD per hour, or a UserError located at ``where``."""
    if isinstance(value, bool):
        raise UserError(f"invalid price {value!r}: not a number", location=where)
    try:
        number = float(value)  # type: ignore[arg-type]  # anything else is reported below
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"invalid price {value!r}: not a number", location=where) from None
    if not math.isfinite(number) or number <= 0:
        raise UserError(f"invalid price {value!r}: must be a positive number of USD per hour", location=where)
    if number > MAX_PRICE_USD_PER_HOUR:
        raise UserError(f"invalid price {value!r}: above {MAX_PRICE_USD_PER_HOUR:,.0f} USD per hour", location=where)
    return number


def parse_price(text: str) -> Price:
    """``BACKEND=USD_PER_HOUR`` as typed after ``--price``."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UserError(f"invalid price {text!r}: expected BACKEND=USD_PER_HOUR, e.g. cpu=0.10")
    return Price(name.strip(), price_value(value.strip(), f"--price {text}"), PriceSource.FLAG)


def parse_machine_price(text: str) -> tuple[str, Price]:
    """``MACHINE:BACKEND=USD_PER_HOUR`` as typed after ``compare --price``: (machine, price)."""
    price = parse_price(text)  # checks the number; the key here is MACHINE:BACKEND
    machine, backend = split_machine_key(price.backend, "--price")
    return machine, Price(backend, price.usd_per_hour, price.source)


def split_machine_key(text: str, option: str) -> tuple[str, str]:
    """``MACHINE:BACKEND`` as ``compare`` names one backend of one result."""
    machine, sep, backend = text.rpartition(":")
    if not sep or not machine or not backend:
        raise UserError(f"invalid {option} {text!r}: expected MACHINE:BACKEND")
    return machine, backend


def config_prices(table: Mapping[str, object], where: str) -> list[Price]:
    """The ``prices = { BACKEND = USD_PER_HOUR }`` table of the project configuration."""
    return [Price(str(name), price_value(value, f"{where}.{name}"), PriceSource.CONFIG) for name, value in table.items()]


def load_price_file(path: Path) -> list[Price]:
    """A TOML file with BACKEND = USD_PER_HOUR, at top level or under [prices]."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"price file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"price file is a folder: {path}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"price file is not UTF-8 text (byte {exc.start})", location=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read price file: {exc.strerror}", location=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise UserError(f"invalid TOML: {exc}", location=f"{path}:{line.group(1)}" if line else str(path)) from None
    table = data.get("prices", data)
    if not isinstance(table, dict):
        raise UserError("expected a [prices] table of BACKEND = USD_PER_HOUR", location=str(path))
    return [Price(str(name), price_value(value, f"{path}: {name}"), PriceSource.FILE) for name, value in table.items()]


def hourly_text(usd_per_hour: float | None) -> str:
    """An hourly price as a launch confirmation states it."""
    return f"about ${usd_per_hour:.2f}/hour" if usd_per_hour is not None else "price unknown"
