"""The catalogue is complete and honest: every example triggers its rule, every
'after' is clean of it, and for fixable rules `torchport fix` turns 'before'
into exactly 'after'."""
from __future__ import annotations

import ast
import json
import re

import pytest

from torchport.cli import main
from torchport.scan import RULES, TARGETS
from torchport.scan.config import ScanConfig
from torchport.scan.fixer import fix_text
from torchport.scan.rules import SEVERITIES

_FILE_FOR = {"TP404": "a.py", "TP502": "kernel.cpp", "TP505": "kernel.cu", "TP601": "a.py"}


def _findings(tmp_path, rule, source):
    from torchport.scan.scanner import scan

    path = tmp_path / _FILE_FOR.get(rule.id, "example.py")
    path.write_text(source)
    return {f.rule_id for f in scan([path], ScanConfig()).findings}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_is_well_formed(rule):
    assert re.fullmatch(r"TP\d{3}", rule.id)
    assert set(rule.severity) == set(TARGETS)
    assert all(s in SEVERITIES or s is None for s in rule.severity.values())
    assert any(rule.severity.values()), "a rule that matters nowhere is noise"
    assert rule.effort in ("low", "medium", "high")
    assert rule.title and rule.detects and rule.why and rule.replacement
    if rule.min_torch:
        assert re.fullmatch(r"\d+\.\d+", rule.min_torch)


def test_ids_and_names_are_unique():
    assert len({r.id for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_before_example_triggers_the_rule_and_after_does_not(tmp_path, rule):
    assert rule.id in _findings(tmp_path, rule, rule.before)
    assert rule.id not in _findings(tmp_path, rule, rule.after)


@pytest.mark.parametrize("rule", [r for r in RULES if r.fixable], ids=lambda r: r.id)
def test_fixable_rule_fixes_before_into_after(rule):
    fixed, applied, _ = fix_text(rule.before, "example.py", ScanConfig(), "2.13")
    assert fixed == rule.after
    assert rule.id in {f.rule_id for f in applied}
    ast.parse(fixed)
    assert fix_text(fixed, "example.py", ScanConfig(), "2.13")[0] == fixed


def test_rules_lists_every_rule(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    for rule in RULES:
        assert f"{rule.id} " in out and rule.title in out


def test_rules_explains_one_with_its_example(capsys):
    assert main(["rules", "TP201"]) == 0
    out = capsys.readouterr().out
    assert "CUDA autocast" in out and "Before:" in out and "After:" in out
    assert "torch.cuda.amp.autocast()" in out and "torch>=2.4" in out


def test_rules_json_and_markdown(capsys):
    assert main(["rules", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in data] == [r.id for r in RULES]
    assert main(["rules", "--format", "markdown"]) == 0
    table = capsys.readouterr().out
    assert table.count("\n| <a id=") == len(RULES)


def test_unknown_rule_is_one_error_line(capsys):
    assert main(["rules", "TP999"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchport: error:") and "TP999" in err[0]
