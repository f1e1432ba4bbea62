"""Presenting the rule table: ``torchport rules`` listing, explanation, JSON and Markdown."""
from __future__ import annotations

from torchport.errors import UserError
from torchport.scan.rules import RULES, RULES_BY_ID, SEVERITY_RANK, TARGET_NAMES, TARGETS, Rule
from torchport.scan.sources import urls as source_urls

_ABBREVIATION = {"error": "E", "silent": "S", "perf": "P", "info": "I", None: "-"}


def find(rule_id: str) -> Rule:
    rule = RULES_BY_ID.get(rule_id.upper())
    if rule is None:
        by_name = [r for r in RULES if r.name == rule_id]
        if by_name:
            return by_name[0]
        raise UserError(f"no rule '{rule_id}' (run `torchport rules` for the list)", location="torchport rules")
    return rule


def rule_dict(rule: Rule) -> dict:
    return {
        "id": rule.id, "name": rule.name, "title": rule.title, "detects": rule.detects,
        "why": rule.why, "severity": dict(rule.severity), "replacement": rule.replacement,
        "min_torch": rule.min_torch, "fixable": rule.fixable, "effort": rule.effort,
        "before": rule.before, "after": rule.after, "sources": rule.sources,
    }


def _severity_cells(rule: Rule) -> list[str]:
    return [_ABBREVIATION[rule.severity[t]] for t in TARGETS]


def listing() -> str:
    header = f"{'id':<6} {'fix':<3} " + " ".join(f"{t[:4]:>4}" for t in TARGETS) + "  title"
    lines = [header]
    for rule in RULES:
        cells = " ".join(f"{c:>4}" for c in _severity_cells(rule))
        lines.append(f"{rule.id:<6} {'yes' if rule.fixable else '':<3} {cells}  {rule.title}")
    lines += ["", "E error (will not run)  S silent (runs, but wrong or degraded)  P perf  I info  - fine",
              "Targets: " + "; ".join(f"{t}: {TARGET_NAMES[t]}" for t in TARGETS),
              "`torchport rules ID` explains one rule with a before/after example."]
    return "\n".join(lines) + "\n"


def explain(rule: Rule) -> str:
    worst_first = sorted(TARGETS, key=lambda t: -SEVERITY_RANK.get(rule.severity[t] or "", 0))
    lines = [f"{rule.id} {rule.name}: {rule.title}", "",
             f"Detects:  {rule.detects}", f"Why:      {rule.why}", "", "Per target:"]
    for target in worst_first:
        lines.append(f"  {target:<9} {rule.severity[target] or 'fine'}")
    lines += ["",
              f"Instead:  {rule.replacement}",
              f"Needs:    torch>={rule.min_torch}" if rule.min_torch else "Needs:    any torch",
              f"Auto-fix: {'yes, `torchport fix`' if rule.fixable else 'no'}"
              f"  (manual effort otherwise: {rule.effort})",
              f"Sources:  {', '.join(source_urls(rule.sources))}" if source_urls(rule.sources) else "",
              "", "Before:", *(("    " + line).rstrip() for line in rule.before.splitlines()),
              "", "After:", *(("    " + line).rstrip() for line in rule.after.splitlines())]
    return "\n".join(lines) + "\n"


def markdown_table() -> str:
    lines = ["| id | title | " + " | ".join(TARGETS) + " | fix | replacement (min torch) |",
             "|---|---|" + "---|" * len(TARGETS) + "---|---|"]
    for rule in RULES:
        version = f" ({rule.min_torch})" if rule.min_torch else ""
        lines.append(f"| <a id=\"{rule.id.lower()}\"></a>{rule.id} | {rule.title.replace('|', '/')} | "
                     + " | ".join(_severity_cells(rule))
                     + f" | {'yes' if rule.fixable else 'no'} | {rule.replacement.replace('|', '/')}{version} |")
    return "\n".join(lines) + "\n"
