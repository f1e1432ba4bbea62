"""One visitor from the core and every rule family.

A family's detector class declares what it handles in class tables, by method name:

    CALLS          {qualified name: method(call, qualname) -> reported}
    CALL_PREFIXES  ((predicate on a qualified name, method), ...), tried after CALLS
    METHODS        {method name: method(call)} for obj.method(...) outside torch
    KEYWORDS       {keyword: method(call, keyword, torch_call)}
    IMPORTS        (method(node, module) -> reported, ...)
    STRINGS        ((prefix, method(constant, value)), ...) for string literals starting so
    COMPARED_STRINGS (method(element, value, lists_others) -> handled, ...)
    NAMED_DEFAULTS ((word in an option's name, method(default, where)), ...)
    ASSIGNMENTS    (method(name, value), ...)
    ATTRIBUTES     {attribute name: method(attribute)}
    CALL_CLAIMS    (method(call) -> the whole call was reported, ...)
    CALL_OBSERVERS (method(call), ...), before a call's own rules run
    FUNCTIONS      (method(function definition), ...)
    TRIGGER_WORDS  words without which the family finds nothing (see python.TRIGGERS)

``compose`` turns the names into functions once, at import: a misspelt method name
or two families claiming the same call fail there, not in the middle of a scan.
"""
from __future__ import annotations

from torchport.scan.detectors.backend_flags import BackendFlagDetector
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
FAMILIES = (DeviceDetector, CudaRuntimeDetector, MixedPrecisionDetector, BackendFlagDetector,
            DistributedDetector, NativeCodeDetector, DependencyDetector, DtypeDetector, TorchXlaDetector)
# Words a family needs in a file beyond the scanner's own trigger words (python.TRIGGERS):
# the fast path skips a file, or a statement, that holds none of them.
FAMILY_TRIGGER_WORDS = tuple(word for family in FAMILIES for word in family.__dict__.get("TRIGGER_WORDS", ()))


def compose(families: tuple[type, ...]) -> type[AnalyzerCore]:
    """The families and the core as one visitor class, with every table resolved."""
    analyzer: type[AnalyzerCore] = type("Analyzer", (*families, AnalyzerCore),
                                        {"__doc__": "Every family's rules in one walk."})

    def function(name: str):
        found = getattr(analyzer, name, None)
        if not callable(found):
            raise TypeError(f"scan detector table names '{name}', which no detector defines")
        return found

    def merged(table: str) -> dict:
        result: dict = {}
        for owner in (*families, AnalyzerCore):
            for key, name in owner.__dict__.get(table, {}).items():
                if key in result:
                    raise TypeError(f"scan detectors: {owner.__name__}.{table} claims '{key}', "
                                    "which another detector already handles")
                result[key] = function(name)
        return result

    def joined(table: str) -> list:
        return [entry for family in families for entry in family.__dict__.get(table, ())]

    # Two families defining the same method would silently shadow one another.
    defined: dict[str, str] = {name: "AnalyzerCore" for name in AnalyzerCore.__dict__}
    for family in families:
        for name, value in family.__dict__.items():
            if callable(value) and not name.isupper():
                if name in defined:
                    raise TypeError(f"scan detectors: {family.__name__}.{name} is also defined by {defined[name]}")
                defined[name] = family.__name__

    analyzer.call_handlers = merged("CALLS")
    analyzer.method_handlers = merged("METHODS")
    analyzer.keyword_handlers = merged("KEYWORDS")
    analyzer.attribute_handlers = merged("ATTRIBUTES")
    analyzer.string_handlers = tuple((prefix, function(name)) for prefix, name in joined("STRINGS"))
    analyzer.string_prefixes = tuple(prefix for prefix, _ in analyzer.string_handlers)
    analyzer.call_prefix_handlers = tuple((matches, function(name)) for matches, name in joined("CALL_PREFIXES"))
    analyzer.named_default_handlers = tuple((word, function(name)) for word, name in joined("NAMED_DEFAULTS"))
    for table, attribute in (("IMPORTS", "import_handlers"), ("COMPARED_STRINGS", "compared_string_handlers"),
                             ("ASSIGNMENTS", "assignment_handlers"),
                             ("CALL_CLAIMS", "call_claims"), ("CALL_OBSERVERS", "call_observers"),
                             ("FUNCTIONS", "function_handlers")):
        setattr(analyzer, attribute, tuple(function(name) for name in joined(table)))
    analyzer._visitors = {}  # visit_ methods looked up per node class, for this class only
    return analyzer


Analyzer = compose(FAMILIES)
