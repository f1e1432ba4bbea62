"""Citations users can open: rule sources are public pages, and nothing torchport
ships or prints points at the project's private research notes."""
from __future__ import annotations

from conftest import ROOT, run_torchport
from torchport.scan.rules import RULES
from torchport.scan.sources import PATTERN_URLS, urls


def test_every_rule_cites_public_pages():
    for rule in RULES:
        if rule.sources:
            cited = urls(rule.sources)
            assert cited, f"{rule.id}: {rule.sources} names no known pattern"
            assert all(url.startswith("https://") for url in cited)
    assert all(url.startswith("https://") for pages in PATTERN_URLS.values() for url in pages)


def test_rules_prints_urls_and_no_private_path():
    completed = run_torchport("rules", "TP001")
    assert completed.returncode == 0, completed.stderr
    assert "Sources:  https://docs.pytorch.org/" in completed.stdout
    assert "shared/research" not in completed.stdout


def test_nothing_shipped_or_documented_names_the_research_notes():
    shipped = [*ROOT.joinpath("src", "torchport").rglob("*.py"), *ROOT.joinpath("src", "torchport").rglob("*.json"),
               *ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"]
    named = [str(path.relative_to(ROOT)) for path in shipped if "shared/research" in path.read_text(encoding="utf-8")]
    assert named == []
