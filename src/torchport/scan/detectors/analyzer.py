"""One visitor from the core and every rule family.

A family's detector class declares what it handles in class tables, by method name:

    CALLS          {qualified name: method(call, qualname) -> reported}
    CALL_PREFIXES  ((predicate on a qualified name, method), ...), tried after CALLS
    METHODS        {method name: method(call)} for obj.method(...) outside torch
    KEYWORDS       {keyword: method(call, keyword, torch_call)}
    IMPORTS        (method(node, module) -> reported, ...)
    STRINGS        (method(constant, value), ...) for every string literal
    COMPARED_STRINGS (method(element, value, lists_others) -> handled, ...)
    NAMED_DEFAULTS ((word in an option's name, method(default, where)), ...)
    ASSIGNMENTS    (method(name, value), ...)
    ATTRIBUTES     (method(attribute) -> reported, ...)
    CALL_CLAIMS    (method(call) -> the whole call was reported, ...)
    CALL_OBSERVERS (method(call), ...), before a call's own rules run
    FUNCTIONS      (method(function definition), ...)

``compose`` turns the names into functions once, at import: a misspelt method name
or two families claiming the same call fail there, not in the middle of a scan.
"""
from __future__ import annotations

from torchport.scan.detectors.core import AnalyzerCore
from torchport.scan.detectors.cuda_runtime import CudaRuntimeDetector
from torchport.scan.detectors.dependencies import DependencyDetector
from torchport.scan.detectors.devices import DeviceDetector
from torchport.scan.detectors.distributed import DistributedDetector
from torchport.scan.detectors.dtypes import DtypeDetector
from torchport.scan.detectors.mixed_precision import MixedPrecisionDetector
from torchport.scan.detectors.native_code import NativeCodeDetector
from torchport.scan.detectors.torch_xla import TorchXlaDetector

# In the order their hooks run where order matters (a string compared with "cuda"
# is a device comparison before it is anything else).
FAMILIES = (DeviceDetector, CudaRuntimeDetector, MixedPrecisionDetector, DistributedDetector,
            NativeCodeDetector, DependencyDetector, DtypeDetector, TorchXlaDetector)


class Analyzer(*FAMILIES, AnalyzerCore):
    """Every family's rules in one walk of the module."""


def _function(name: str):
    function = getattr(Analyzer, name, None)
    if not callable(function):
        raise TypeError(f"scan detector table names '{name}', which no detector defines")
    return function


def _merged(table: str) -> dict:
    merged: dict = {}
    for owner in (*FAMILIES, AnalyzerCore):
        for key, name in owner.__dict__.get(table, {}).items():
            if key in merged:
                raise TypeError(f"scan detectors: {owner.__name__}.{table} claims '{key}' twice")
            merged[key] = _function(name)
    return merged


def _joined(table: str) -> tuple:
    return tuple(entry for family in FAMILIES for entry in family.__dict__.get(table, ()))


def compose() -> None:
    Analyzer.call_handlers = _merged("CALLS")
    Analyzer.method_handlers = _merged("METHODS")
    Analyzer.keyword_handlers = _merged("KEYWORDS")
    Analyzer.call_prefix_handlers = tuple((matches, _function(name)) for matches, name in _joined("CALL_PREFIXES"))
    Analyzer.named_default_handlers = tuple((word, _function(name)) for word, name in _joined("NAMED_DEFAULTS"))
    for table, attribute in (("IMPORTS", "import_handlers"), ("STRINGS", "string_handlers"),
                             ("COMPARED_STRINGS", "compared_string_handlers"),
                             ("ASSIGNMENTS", "assignment_handlers"), ("ATTRIBUTES", "attribute_handlers"),
                             ("CALL_CLAIMS", "call_claims"), ("CALL_OBSERVERS", "call_observers"),
                             ("FUNCTIONS", "function_handlers")):
        setattr(Analyzer, attribute, tuple(_function(name) for name in _joined(table)))
    # Two families defining the same visit_ or helper method would silently shadow one another.
    seen: dict[str, str] = {}
    for family in FAMILIES:
        for name in family.__dict__:
            if callable(family.__dict__[name]) and not name.isupper():
                if name in seen or name in AnalyzerCore.__dict__:
                    raise TypeError(f"scan detectors: {family.__name__}.{name} is also defined by "
                                    f"{seen.get(name, 'AnalyzerCore')}")
                seen[name] = family.__name__


compose()
