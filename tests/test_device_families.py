"""The device-family table (torchport.glossary) is the one list of targets:
trace's and scan's target lists, titles, op tables and rule severities derive
from it, so a family added there is picked up by both commands."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchport import glossary
from torchport.scan import rules as scan_rules
from torchport.trace import findings as trace_rules
from torchport.trace import support

SCHEMAS = Path(__file__).resolve().parent.parent / "src" / "torchport" / "schemas"

# Families that are not in the table: an eager accelerator with its own dispatch key.
EAGER = glossary.Family("eagerchip", 7, "EagerChipKey", "eagerchip", "eagerchip-scan", trace_title="Eager chip",
                        scan_title="Eager chip (device 'eagerchip')")
# And a lazy one, compiling a graph per input shape as XLA does.
LAZY = glossary.Family("lazychip", 8, "PrivateUse1", "lazychip", "lazychip", trace_title="Lazy chip",
                       scan_title="Lazy chip", lazy=True)
EXTENDED = (*glossary.FAMILIES, EAGER, LAZY)


@pytest.mark.parametrize("family", [f for f in glossary.FAMILIES if f.trace_target], ids=lambda f: f.name)
def test_every_trace_family_is_a_trace_target(family):
    target = family.trace_target
    assert target in trace_rules.TARGETS
    assert support.TARGETS[target].title == family.trace_title != ""
    assert support.TARGETS[target].key == family.dispatch_key
    assert support.TARGETS[target].table == family.op_table
    assert (target in trace_rules.LAZY_TARGETS) == family.lazy
    assert family.dispatch_key in glossary.dispatch_keys()
    for rule_id in ("TR101", "TR102", "TR108", "TR109", "TR110"):  # the rules that hold on every target
        assert target in trace_rules.RULES[rule_id].severity, rule_id


@pytest.mark.parametrize("family", [f for f in glossary.FAMILIES if f.scan_target], ids=lambda f: f.name)
def test_every_scan_family_is_a_scan_target_with_a_severity_for_each_rule(family):
    target = family.scan_target
    assert target in scan_rules.TARGETS
    assert scan_rules.TARGET_NAMES[target] == family.scan_title != ""
    for rule in scan_rules.RULES:
        declared = rule.severities
        assert rule.severity[target] == declared.exceptions.get(target, declared.default), rule.id


def test_the_target_lists_are_the_tables_in_its_order():
    assert tuple(f.trace_target for f in glossary.FAMILIES if f.trace_target) == trace_rules.TARGETS
    assert tuple(f.scan_target for f in glossary.FAMILIES if f.scan_target) == scan_rules.TARGETS
    assert tuple(support.TARGETS) == trace_rules.TARGETS
    for rule in scan_rules.RULES:
        assert tuple(rule.severity) == scan_rules.TARGETS, rule.id


def test_the_trace_schema_names_every_trace_target():
    schema = json.loads((SCHEMAS / "trace.schema.json").read_text(encoding="utf-8"))
    assert schema["$defs"]["target"]["enum"] == list(trace_rules.TARGETS)


def test_a_family_added_to_a_copy_of_the_table_is_a_trace_and_scan_target():
    assert glossary.trace_targets(EXTENDED)[-2:] == ("eagerchip", "lazychip")
    assert glossary.scan_targets(EXTENDED)[-2:] == ("eagerchip-scan", "lazychip")
    assert glossary.lazy_trace_targets(EXTENDED) == (*trace_rules.LAZY_TARGETS, "lazychip")

    targets = support.targets_of(EXTENDED)
    assert targets["eagerchip"] == support.Target("eagerchip", "Eager chip", "EagerChipKey")
    assert targets["eagerchip"].without_kernel == "missing"  # the default: an op without a kernel raises
    assert {name: target for name, target in targets.items() if name in support.TARGETS} == support.TARGETS


def test_a_new_family_gets_the_trace_severities_of_its_kind():
    table = trace_rules.rule_table(glossary.trace_targets(EXTENDED), glossary.lazy_trace_targets(EXTENDED))
    eager = {rule_id: rule.severity.get("eagerchip") for rule_id, rule in table.items()}
    lazy = {rule_id: rule.severity.get("lazychip") for rule_id, rule in table.items()}
    assert eager == {**dict.fromkeys(table), "TR101": "minor", "TR102": "minor", "TR108": "blocker",
                     "TR109": "slow", "TR110": "blocker"}
    assert lazy == {**dict.fromkeys(table), "TR101": "slow", "TR102": "slow", "TR103": "slow", "TR104": "slow",
                    "TR108": "blocker", "TR109": "slow", "TR110": "blocker"}
    # the families already in the table keep their severities
    for rule_id, rule in table.items():
        assert {t: s for t, s in rule.severity.items() if t in trace_rules.TARGETS} == trace_rules.RULES[rule_id].severity

    finding = trace_rules.make_finding(table["TR110"], "app.py:3", 2, 2, "aten::foo", {"eagerchip": "blocker"})
    assert (finding.severity, finding.targets) == ("blocker", {"eagerchip": "blocker"})


def test_a_new_family_gets_each_scan_rules_default():
    targets = glossary.scan_targets(EXTENDED)
    for rule in scan_rules.RULES:
        on_extended = rule.severities.on(targets)
        assert on_extended["eagerchip-scan"] == on_extended["lazychip"] == rule.severities.default, rule.id
        assert {t: on_extended[t] for t in scan_rules.TARGETS} == rule.severity, rule.id
    # the cuda lock-in rules are errors on a new accelerator, as on XPU
    assert scan_rules.rule(scan_rules.DOT_CUDA).severities.on(targets)["eagerchip-scan"] == "error"


def test_a_severity_for_a_target_or_of_a_kind_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="unknown target 'trainum'"):
        scan_rules.on_targets("error", trainum=None).on(scan_rules.TARGETS)
    with pytest.raises(ValueError, match="unknown severity 'fatal'"):
        scan_rules.on_targets("fatal")
    with pytest.raises(ValueError, match="'neuron', which is not a trace target"):
        support.targets_of(tuple(f for f in glossary.FAMILIES if f is not glossary.NEURON))
