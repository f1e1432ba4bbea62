"""The scan detectors and the rule table agree: every rule has a detector, every
detector's rule is in the table, rule ids reach the detectors only as named
constants, and docs/scan.md shows the table as it is."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from torchport.scan import detectors, docs, rules
from torchport.scan.detectors.analyzer import FAMILIES, compose

SCAN = Path(rules.__file__).parent
REPO = SCAN.parents[2]
_NON_PYTHON_DETECTORS = ("torchport.scan.textfiles", "torchport.scan.packages", "torchport.scan.extensions")
# Python detectors that read across files, after every file is scanned.
_ACROSS_FILE_DETECTORS = ("torchport.scan.import_refusal",)


def _detector_modules():
    names = [f"torchport.scan.detectors.{m.name}" for m in pkgutil.iter_modules(detectors.__path__)]
    return [importlib.import_module(name) for name in (*names, *_NON_PYTHON_DETECTORS, *_ACROSS_FILE_DETECTORS)
            if hasattr(importlib.import_module(name), "RULE_IDS")]


def _rule_constants() -> dict[str, str]:
    return {name: value for name, value in vars(rules).items()
            if name.isupper() and isinstance(value, str) and re.fullmatch(r"TP\d{3}", value)}


def test_every_rule_has_a_constant_named_after_it():
    constants = _rule_constants()
    assert sorted(constants.values()) == sorted(rule.id for rule in rules.RULES)
    for rule in rules.RULES:
        assert constants[rule.name.upper().replace("-", "_")] == rule.id


def test_every_rule_has_a_detector_and_every_detector_rule_exists():
    modules = _detector_modules()
    assert len(modules) >= 10  # nine families and the non-Python readers
    declared = {rule_id for module in modules for rule_id in module.RULE_IDS}
    assert declared == set(rules.RULES_BY_ID)


@pytest.mark.parametrize("module", _detector_modules(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_detector_declares_exactly_the_rules_it_imports(module):
    """RULE_IDS is what the module reports: the rule constants it imports from the table."""
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                and node.module == "torchport.scan.rules" for alias in node.names}
    constants = _rule_constants()
    assert {constants[name] for name in imported if name in constants} == set(module.RULE_IDS)


def test_no_rule_id_is_spelt_out_outside_the_table():
    """A string "TP101" in a detector would bypass the constants (and their import check)."""
    for path in sorted(SCAN.rglob("*.py")):
        if path.name == "rules.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.fullmatch(r"TP\d{3}", node.value), f"{path.name}:{node.lineno}: {node.value!r}"


def test_each_family_module_holds_its_rule_class():
    """A rule family is its hundreds digit (devices TP0, cuda_runtime TP1, ...): each family
    module names the first rule of its class."""
    for module_name, digit in (("devices", "0"), ("cuda_runtime", "1"), ("mixed_precision", "2"),
                               ("backend_flags", "3"), ("distributed", "4"), ("native_code", "5"),
                               ("dependencies", "6"), ("dtypes", "7"), ("torch_xla", "8")):
        module = importlib.import_module(f"torchport.scan.detectors.{module_name}")
        assert module.RULE_IDS[0].startswith(f"TP{digit}"), module_name


def test_a_table_naming_a_missing_method_fails_when_composed():
    class Misspelt:
        METHODS = {"half": "_dot_hlaf"}

    with pytest.raises(TypeError, match="_dot_hlaf"):
        compose((Misspelt, *FAMILIES))


def test_two_families_claiming_one_call_fail_when_composed():
    class Duplicate:
        CALLS = {"torch.device": "_another_torch_device"}

        def _another_torch_device(self, node, qualname):
            return False

    with pytest.raises(TypeError, match="torch.device"):
        compose((Duplicate, *FAMILIES))


def test_a_misspelt_rule_constant_fails_at_import(tmp_path, monkeypatch):
    (tmp_path / "misspelt_detector.py").write_text("from torchport.scan.rules import CUDA_SYNCRONIZE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="CUDA_SYNCRONIZE"):
        importlib.import_module("misspelt_detector")


def test_committed_docs_match_the_rule_table():
    path = REPO / "docs" / "scan.md"
    committed = path.read_text(encoding="utf-8")
    assert docs.render(committed) == committed, "docs/scan.md is out of date: run `python -m torchport.scan.docs`"
    for rule in rules.RULES:
        assert f"#### {rule.id} `{rule.name}`" in committed


def test_docs_check_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "scan.md"
    committed = (REPO / "docs" / "scan.md").read_text(encoding="utf-8")
    stale.write_text(committed.replace("| <a id=\"tp101\"></a>TP101 |", "| TP101 (old) |"))
    assert docs.main([str(stale), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert docs.main([str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == committed
    assert docs.main([str(stale), "--check"]) == 0


def test_docs_without_markers_is_one_error_line(tmp_path, capsys):
    plain = tmp_path / "scan.md"
    plain.write_text("# no markers\n")
    assert docs.main([str(plain), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "markers" in err[0]
