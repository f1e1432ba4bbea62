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
free, total = torch.cuda.mem_get_info()
graph = torch.cuda.CUDAGraph()
name = torch.cuda.get_device_name(0)
import torch_xla.core.xla_model as xm
device = xm.xla_device()
torch.cuda.empty_cache()
"""

# TP003 raised to error: the path without CUDA raises (judges drew TP003 only at silent)
RAISES_WITHOUT_CUDA = """\
import torch


def doubled(n):
    if torch.cuda.is_available():
        return n * 2
    raise RuntimeError("this model needs a GPU")
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


@pytest.fixture(scope="module")
def benchmarks():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import precision_insample
        import precision_pooled
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return precision_insample, precision_pooled


def _scan(capsys, *args: str) -> str:
    main(["scan", *args])
    return capsys.readouterr().out


def _table() -> judged.JudgedTable:
    found = judged.table()
    assert found is not None
    return found


def test_the_shipped_table_is_the_verdict_files_pooled(benchmarks):
    _, precision_pooled = benchmarks
    shipped = json.loads(judged.TABLE.read_text())
    assert shipped == json.loads(json.dumps(precision_pooled.rule_table())), \
        "run benchmarks/precision_pooled.py --write-table"
    assert shipped["samples"] == list(precision_pooled.SINCE_ROUND_14)
    by_rule = sum(cell["judged"] for severities in shipped["by_rule"].values() for cell in severities.values())
    assert by_rule == shipped["all"]["judged"] == precision_pooled.pooled(precision_pooled.SINCE_ROUND_14)["judged"]
    for severities in shipped["by_rule"].values():
        for cell in severities.values():
            low, high = cell["interval"]
            assert 0 <= low <= cell["correct"] / cell["judged"] <= high <= 1


def test_every_verdict_row_of_the_pooled_samples_is_read(benchmarks):
    precision_insample, precision_pooled = benchmarks
    rows = precision_insample.verdicts()
    for seed in precision_pooled.SINCE_ROUND_14:
        assert sum(row["seed"] == seed for row in rows) == 90, seed  # every judge since round 14 judged 90


def test_a_verdict_cell_the_readers_do_not_understand_stops_them(benchmarks, tmp_path, monkeypatch):
    precision_insample, _ = benchmarks
    source = (REPO / "docs" / "precision" / "judge-678904-verdicts.md").read_text()
    row = next(line for line in source.splitlines() if line.startswith("| S678904-001 |"))
    broken = row.replace("INCORRECT (borderline)", "Incorrect.", 1)
    assert broken != row
    (tmp_path / "judge-678904-verdicts.md").write_text(source.replace(row, broken))
    monkeypatch.setattr(precision_insample, "VERDICTS", tmp_path)
    with pytest.raises(ValueError, match="S678904-001: verdict 'Incorrect.'"):
        precision_insample.verdicts()


def test_wilson_interval_stays_within_0_and_1():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(1 - high) and 0.2 < low < 0.25


def test_few_verdicts_or_few_packages_give_counts_not_a_share():
    assert judged.Judged(9, 14, 4, 0.0, 0.75).describe() == "9 of 14, 4 packages (too few for a figure)"
    assert judged.Judged(4, 6, 5, 0.2, 0.9).describe() == "4 of 6, 5 packages (too few for a figure)"
    assert judged.Judged(0, 12, 6, 0.0, 0.0).describe() == "0% (0 of 12, 6 packages; 0-0%)"
    assert judged.Judged(28, 43, 14, 0.424, 0.826).describe() == "65% (28 of 43, 14 packages; 42-83%)"


def test_text_gives_the_figure_of_each_listed_error_or_silent_rule(project, capsys):
    out = _scan(capsys, str(project), "--target", "cpu", "--target", "tpu")
    block = " ".join(out[out.index("how often independent judges"):].split())
    table = _table()
    assert f"({table.source()}):" in block
    assert f"every rule {table.overall.describe()}" in block
    assert f"TP002 error {table.at('TP002', 'error').describe()}" in block
    assert "%" in table.at("TP002", "error").describe()
    few = table.at("TP108", "error")
    assert few is not None and not few.enough and f"TP108 error {few.counts()} (too few for a figure)" in block
    assert table.at("TP801", "error") is None and "TP801 error not judged at error yet" in block
    # TP105 empty_cache is info on these targets: not listed, and never judged
    assert "TP105" not in block
    assert out.index("how often independent judges") < out.index("error and silent say what happens")


def test_a_rule_judged_at_another_severity_says_so(tmp_path, capsys):
    (tmp_path / "model.py").write_text(RAISES_WITHOUT_CUDA)
    block = " ".join(_scan(capsys, str(tmp_path)).split())
    silent = _table().at("TP003", "silent")
    assert _table().at("TP003", "error") is None and silent is not None
    assert f"TP003 error not judged at error yet (at silent: {silent.counts()})" in block


def test_no_figures_without_listed_error_or_silent_findings(tmp_path, capsys):
    (tmp_path / "a.py").write_text("import torch\n\ntorch.cuda.empty_cache()\n")
    assert "how often independent judges" not in _scan(capsys, str(tmp_path), "--show-info")
    (tmp_path / "b.py").write_text("import torch\n\nmodel = torch.nn.Linear(4, 4).cuda()\n")
    assert "how often independent judges" not in _scan(capsys, str(tmp_path), "--target", "rocm")
    (tmp_path / "a.py").write_text("import torch\n\nif torch.cuda.is_available():\n    print(1)\n"
                                   "torch.backends.cudnn.benchmark = torch.cuda.is_available()\n")
    (tmp_path / "b.py").unlink()
    assert "TP003 silent" in " ".join(_scan(capsys, str(tmp_path)).split())
    assert "how often independent judges" not in _scan(capsys, str(tmp_path), "--min-severity", "error")


def test_json_and_sarif_carry_the_figures(project, capsys):
    document = json.loads(_scan(capsys, str(project), "--format", "json"))
    table = _table()
    assert document["judged"] == table.as_dict()
    assert document["judged"]["where"].startswith("https://") and document["judged"]["packages"] > 0
    by_rule = {f["rule"]: f["judged"] for f in document["findings"]}
    two = table.at("TP002", "error")
    assert two is not None
    assert by_rule["TP002"] == {"severity": "error", **two.as_dict()}
    assert by_rule["TP801"] is None and by_rule["TP105"] is None  # never judged; info is never sampled

    sarif = json.loads(_scan(capsys, str(project), "--format", "sarif"))
    jsonschema.validate(sarif, SARIF_SCHEMA)
    rules = {r["id"]: r["properties"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    share = two.correct / two.judged
    assert 0.25 <= share < 0.75 and two.enough
    assert rules["TP002"]["precision"] == ("medium" if share >= 0.5 else "low")
    assert rules["TP002"]["judged"] == {"severity": "error", **two.as_dict(), "asOf": table.as_of,
                                        "where": judged.WHERE}
    assert "precision" not in rules["TP108"] and "judged" not in rules["TP801"]
    results = {r["ruleId"]: r["properties"]["judged"] for r in sarif["runs"][0]["results"]}
    assert results["TP002"] == by_rule["TP002"]


def test_sarif_gives_no_figure_for_a_severity_no_judge_drew(tmp_path, capsys):
    (tmp_path / "probe.py").write_text("import subprocess\n\nsubprocess.run(['nvidia-smi'])\n")
    sarif = json.loads(_scan(capsys, str(tmp_path), "--format", "sarif", "--target", "rocm"))
    rules = {r["id"]: r["properties"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["TP109"]["severity"] == {"rocm": "info"}
    assert "judged" not in rules["TP109"] and "precision" not in rules["TP109"]
    everywhere = json.loads(_scan(capsys, str(tmp_path), "--format", "sarif"))
    rules = {r["id"]: r["properties"] for r in everywhere["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["TP109"]["judged"]["severity"] == "error"


def test_without_the_table_the_scan_reports_without_figures(project, capsys, monkeypatch, tmp_path):
    with_table = _scan(capsys, str(project))
    monkeypatch.setattr(judged, "TABLE", tmp_path / "missing.json")
    judged.table.cache_clear()
    try:
        assert main(["scan", str(project), "--fail-on", "never"]) == 0
        out = capsys.readouterr().out
        assert "how often independent judges" not in out and "TP002" in out
        document = json.loads(_scan(capsys, str(project), "--format", "json"))
        assert document["judged"] is None and all(f["judged"] is None for f in document["findings"])
    finally:
        judged.table.cache_clear()
    assert "how often independent judges" in with_table
