"""scan tells the reader how often independent judges found each rule right: the table shipped in
data/scan_judged.json is the verdict files pooled, and text, JSON and SARIF read it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

from torchport.cli import main
from torchport.scan import judged
from torchport.stats import wilson_interval

REPO = Path(__file__).resolve().parents[1]
SARIF_SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())

SCRIPT = """\
import torch

model = torch.nn.Linear(4, 4).cuda()
torch.cuda.ipc_collect()
name = torch.cuda.get_device_name(0)
import torch_xla.core.xla_model as xm
device = xm.xla_device()
torch.cuda.empty_cache()
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


def _scan(capsys, *args: str) -> str:
    main(["scan", *args])
    return capsys.readouterr().out


def test_the_shipped_table_is_the_verdict_files_pooled():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import precision_pooled
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    shipped = json.loads(judged.TABLE.read_text())
    assert shipped == precision_pooled.rule_table(), "run benchmarks/precision_pooled.py --write-table"
    assert shipped["samples"] == list(precision_pooled.SINCE_ROUND_14)
    assert shipped["as_of"] == precision_pooled.POOLED_AS_OF
    by_rule = sum(n for severities in shipped["by_rule"].values() for _, n in severities.values())
    assert by_rule == shipped["all"][1] == precision_pooled.pooled(precision_pooled.SINCE_ROUND_14)["judged"]


def test_wilson_interval_at_the_edges():
    assert wilson_interval(0, 10)[0] == pytest.approx(0.0, abs=1e-12)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0, abs=1e-12)
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(1 - high) and 0.2 < low < 0.25


def test_text_gives_the_figure_of_each_listed_error_or_silent_rule(project, capsys):
    out = _scan(capsys, str(project), "--target", "cpu", "--target", "tpu")
    block = out[out.index("how often independent judges"):].splitlines()
    table = judged.table()
    assert f"{table.samples} samples, {table.packages} packages, to {table.as_of}" in block[0]
    assert block[1].split() == ["every", "rule", *table.overall.describe().split()]
    rows = {tuple(line.split()[:2]): line for line in block[2:] if line.startswith("  TP")}
    # TP105 empty_cache is info on these targets: hidden, and never judged, so not listed
    assert set(rows) == {("TP002", "error"), ("TP110", "error"), ("TP005", "error"), ("TP801", "error"),
                         ("TP802", "error")}
    assert rows[("TP002", "error")].endswith(table.at("TP002", "error").describe())
    assert table.at("TP002", "error").enough and "%" in rows[("TP002", "error")]
    assert table.at("TP110", "error").judged < judged.MIN_JUDGED
    assert rows[("TP110", "error")].endswith("(too few for a figure)") and "%" not in rows[("TP110", "error")]
    assert table.at("TP801", "error") is None and rows[("TP801", "error")].endswith("not judged yet")
    assert out.index("how often independent judges") < out.index("error and silent say what happens")


def test_no_figures_without_listed_error_or_silent_findings(tmp_path, capsys):
    (tmp_path / "a.py").write_text("import torch\n\ntorch.cuda.empty_cache()\n")
    assert "how often independent judges" not in _scan(capsys, str(tmp_path), "--show-info")
    (tmp_path / "b.py").write_text("import torch\n\nmodel = torch.nn.Linear(4, 4).cuda()\n")
    # listed only at or above --min-severity: nothing at error is listed for ROCm
    assert "how often independent judges" not in _scan(capsys, str(tmp_path), "--target", "rocm")


def test_json_and_sarif_carry_the_figures(project, capsys):
    document = json.loads(_scan(capsys, str(project), "--format", "json"))
    table = judged.table()
    assert document["judged"] == {"as_of": table.as_of, "samples": table.samples, "packages": table.packages,
                                  "correct": table.overall.correct, "judged": table.overall.judged,
                                  "where": judged.WHERE}
    by_rule = {f["rule"]: f["judged"] for f in document["findings"]}
    two = table.at("TP002", "error")
    assert by_rule["TP002"] == {"severity": "error", "correct": two.correct, "judged": two.judged}
    assert by_rule["TP801"] is None and by_rule["TP105"] is None  # never judged; info is never sampled

    sarif = json.loads(_scan(capsys, str(project), "--format", "sarif"))
    jsonschema.validate(sarif, SARIF_SCHEMA)
    rules = {r["id"]: r["properties"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    share = two.correct / two.judged if table.rule("TP002") == two else None
    assert share is not None and 0.5 <= share < 0.75 and rules["TP002"]["precision"] == "medium"
    assert rules["TP002"]["judged"] == {"correct": two.correct, "judged": two.judged, "asOf": table.as_of}
    assert "precision" not in rules["TP110"] and rules["TP110"]["judged"]["judged"] < judged.MIN_JUDGED
    assert "judged" not in rules["TP801"]
    results = {r["ruleId"]: r["properties"]["judged"] for r in sarif["runs"][0]["results"]}
    assert results["TP002"] == by_rule["TP002"]


def test_a_rule_judged_at_two_severities_sums_them():
    table = judged.table()
    both = table.by_rule["TP004"]
    assert set(both) == {"error", "silent"}
    total = table.rule("TP004")
    assert total is not None and total.judged == both["error"].judged + both["silent"].judged
    assert table.at("TP004", "info") is None and table.rule("TP999") is None
