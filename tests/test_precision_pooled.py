"""benchmarks/precision_pooled.py on the verdict files kept in docs/precision: the pooled figure
the README quotes, its package-resampled interval, and the two judges' agreement."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "precision_pooled.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_pooled_since_round_14_is_the_figure_the_readme_quotes():
    result = _run()
    assert result.returncode == 0, result.stderr
    assert "1652/4230 = 39.1%; 95% Wilson 37.6%-40.5%" in result.stdout
    bootstrap = result.stdout.rsplit("packages resampled ", 1)[1].split()[0]
    low, high = (float(part.rstrip("%")) for part in bootstrap.split("-"))
    assert low < 37.6 and high > 40.5  # packages are clusters: wider than Wilson
    assert "together 39.1% on 4,230 findings" in " ".join((ROOT / "README.md").read_text().split())


def test_one_sample_and_an_unknown_seed():
    assert "34/90 = 37.8%" in _run("457076").stdout
    assert "51/90 = 56.7%" in _run("364424").stdout
    assert "59/90 = 65.6%" in _run("988409").stdout
    assert "31/90 = 34.4%" in _run("659119").stdout
    assert "40/90 = 44.4%" in _run("678904").stdout  # its verdict cells read "CORRECT (borderline)"
    assert "51/90 = 56.7%" in _run("680243").stdout
    assert "36/90 = 40.0%" in _run("501976").stdout
    assert "44/90 = 48.9%" in _run("77419").stdout
    assert "36/90 = 40.0%" in _run("802241").stdout
    assert "34/90 = 37.8%" in _run("110588").stdout
    assert "32/90 = 35.6%" in _run("662729").stdout
    assert "29/90 = 32.2%" in _run("555827").stdout
    assert "42/90 = 46.7%" in _run("858731").stdout
    assert "50/90 = 55.6%" in _run("830311").stdout
    assert "26/90 = 28.9%" in _run("150301").stdout
    assert "21/90 = 23.3%" in _run("115842").stdout
    assert "32/90 = 35.6%" in _run("508736").stdout
    assert "24/90 = 26.7%" in _run("753606").stdout
    assert "27/90 = 30.0%" in _run("831176").stdout
    assert "38/90 = 42.2%" in _run("710376").stdout
    assert "18/90 = 20.0%" in _run("414925").stdout
    assert "50/90 = 55.6%" in _run("65846").stdout
    assert "63/90 = 70.0%" in _run("642689").stdout
    assert "49/90 = 54.4%" in _run("813024").stdout
    assert "45/90 = 50.0%" in _run("564103").stdout
    assert "43/90 = 47.8%" in _run("373572").stdout
    assert "15/90 = 16.7%" in _run("518142").stdout
    assert "15/90 = 16.7%" in _run("316155").stdout
    assert "43/90 = 47.8%" in _run("439048").stdout
    assert "38/90 = 42.2%" in _run("134135").stdout
    assert "18/90 = 20.0%" in _run("623435").stdout
    assert "14/90 = 15.6%" in _run("906258").stdout
    assert "16/90 = 17.8%" in _run("483497").stdout
    assert "36/90 = 40.0%" in _run("396950").stdout
    unknown = _run("1")
    assert unknown.returncode != 0 and "no verdict file for seed 1" in unknown.stderr


@pytest.mark.parametrize(("seed", "expected"), [
    ("676501", ("agreement 81/90 = 90.0%", "kappa 0.79", "30/32 = 93.8% by judge B", "30/37 = 81.1% by judge A")),
    ("457076", ("agreement 78/90 = 86.7%", "kappa 0.72", "30/34 = 88.2% by judge B", "30/38 = 78.9% by judge A")),
    ("988409", ("agreement 90/90 = 100.0%", "kappa 1.00", "59/59 = 100.0% by judge B", "59/59 = 100.0% by judge A")),
    ("678904", ("agreement 84/90 = 93.3%", "kappa 0.86", "35/40 = 87.5% by judge B", "35/36 = 97.2% by judge A")),
    ("680243", ("agreement 73/90 = 81.1%", "kappa 0.61", "43/51 = 84.3% by judge B", "43/52 = 82.7% by judge A")),
    ("501976", ("agreement 86/90 = 95.6%", "kappa 0.91", "35/36 = 97.2% by judge B", "35/38 = 92.1% by judge A")),
    ("77419", ("agreement 83/90 = 92.2%", "kappa 0.84", "38/44 = 86.4% by judge B", "38/39 = 97.4% by judge A")),
    ("802241", ("agreement 84/90 = 93.3%", "kappa 0.86", "35/36 = 97.2% by judge B", "35/40 = 87.5% by judge A")),
    ("700555", ("agreement 79/90 = 87.8%", "kappa 0.76", "43/43 = 100.0% by judge B", "43/54 = 79.6% by judge A")),
    ("976340", ("agreement 88/90 = 97.8%", "kappa 0.95", "25/26 = 96.2% by judge B", "25/26 = 96.2% by judge A")),
    ("49420", ("agreement 76/90 = 84.4%", "kappa 0.66", "25/36 = 69.4% by judge B", "25/28 = 89.3% by judge A")),
    ("200569", ("agreement 86/90 = 95.6%", "kappa 0.83", "12/13 = 92.3% by judge B", "12/15 = 80.0% by judge A")),
    ("444797", ("agreement 84/90 = 93.3%", "kappa 0.87", "46/49 = 93.9% by judge B", "46/49 = 93.9% by judge A")),
    # 25 of their 31 splits are rows reached only in a distributed launch (borderline for both)
    ("811980", ("agreement 59/90 = 65.6%", "kappa 0.38", "32/32 = 100.0% by judge B", "32/63 = 50.8% by judge A")),
    ("110588", ("agreement 80/90 = 88.9%", "kappa 0.77", "31/34 = 91.2% by judge B", "31/38 = 81.6% by judge A")),
    ("662729", ("agreement 89/90 = 98.9%", "kappa 0.98", "31/32 = 96.9% by judge B", "31/31 = 100.0% by judge A")),
    ("555827", ("agreement 87/90 = 96.7%", "kappa 0.92", "26/29 = 89.7% by judge B", "26/26 = 100.0% by judge A")),
    ("858731", ("agreement 86/90 = 95.6%", "kappa 0.91", "40/42 = 95.2% by judge B", "40/42 = 95.2% by judge A")),
    ("830311", ("agreement 87/90 = 96.7%", "kappa 0.93", "50/50 = 100.0% by judge B", "50/53 = 94.3% by judge A")),
    # seven of their ten splits are kiui's `__main__` smoke tests and GUI
    ("150301", ("agreement 80/90 = 88.9%", "kappa 0.74", "23/26 = 88.5% by judge B", "23/30 = 76.7% by judge A")),
    ("115842", ("agreement 87/90 = 96.7%", "kappa 0.91", "20/21 = 95.2% by judge B", "20/22 = 90.9% by judge A")),
    # eight of their sixteen splits are opencompass's wrappers whose backends need CUDA anyway
    ("508736", ("agreement 74/90 = 82.2%", "kappa 0.64", "30/32 = 93.8% by judge B", "30/44 = 68.2% by judge A")),
    ("753606", ("agreement 87/90 = 96.7%", "kappa 0.92", "23/24 = 95.8% by judge B", "23/25 = 92.0% by judge A")),
    ("831176", ("agreement 85/90 = 94.4%", "kappa 0.87", "26/27 = 96.3% by judge B", "26/30 = 86.7% by judge A")),
    ("710376", ("agreement 85/90 = 94.4%", "kappa 0.88", "33/38 = 86.8% by judge B", "33/33 = 100.0% by judge A")),
    ("414925", ("agreement 85/90 = 94.4%", "kappa 0.84", "18/18 = 100.0% by judge B", "18/23 = 78.3% by judge A")),
    ("65846", ("agreement 86/90 = 95.6%", "kappa 0.91", "47/50 = 94.0% by judge B", "47/48 = 97.9% by judge A")),
    ("642689", ("agreement 81/90 = 90.0%", "kappa 0.76", "59/63 = 93.7% by judge B", "59/64 = 92.2% by judge A")),
    ("564103", ("agreement 82/90 = 91.1%", "kappa 0.82", "41/45 = 91.1% by judge B", "41/45 = 91.1% by judge A")),
    ("373572", ("agreement 85/90 = 94.4%", "kappa 0.89", "39/43 = 90.7% by judge B", "39/40 = 97.5% by judge A")),
    ("518142", ("agreement 81/90 = 90.0%", "kappa 0.71", "15/15 = 100.0% by judge B", "15/24 = 62.5% by judge A")),
    ("316155", ("agreement 80/90 = 88.9%", "kappa 0.67", "14/15 = 93.3% by judge B", "14/23 = 60.9% by judge A")),
    ("439048", ("agreement 87/90 = 96.7%", "kappa 0.93", "42/43 = 97.7% by judge B", "42/44 = 95.5% by judge A")),
    # ten of their seventeen splits are rockmate's opt-in offload schedules and statistics on a failing path
    ("134135", ("agreement 73/90 = 81.1%", "kappa 0.63", "35/38 = 92.1% by judge B", "35/49 = 71.4% by judge A")),
    # four of their seven splits are hiera-optim's top-level `import triton`
    ("623435", ("agreement 83/90 = 92.2%", "kappa 0.79", "18/18 = 100.0% by judge B", "18/25 = 72.0% by judge A")),
    # twenty-six of their twenty-eight splits are float64 on devices that default to the CPU
    ("906258", ("agreement 62/90 = 68.9%", "kappa 0.33", "13/14 = 92.9% by judge B", "13/40 = 32.5% by judge A")),
    # sixteen of their twenty-two splits are float64 rows, fourteen in pinn-rk (tables on the device the caller passes)
    ("483497", ("agreement 68/90 = 75.6%", "kappa 0.46", "16/16 = 100.0% by judge B", "16/38 = 42.1% by judge A")),
    # the same rows correct; they differ only in which they call borderline
    ("396950", ("agreement 90/90 = 100.0%", "kappa 1.00", "36/36 = 100.0% by judge B", "36/36 = 100.0% by judge A")),
])
def test_agreement_of_the_two_judgements_of_a_sample(seed, expected):
    precision = ROOT / "docs" / "precision"
    result = _run("--agreement", str(precision / f"judge-{seed}-verdicts.md"),
                  str(precision / f"rejudge-{seed}-verdicts.md"))
    assert result.returncode == 0, result.stderr
    for line in expected:
        assert line in result.stdout


def test_the_bounds_over_the_double_judged_samples():
    precision = ROOT / "docs" / "precision"
    seeds = ("676501", "457076", "988409", "678904", "680243", "501976", "77419", "802241", "700555", "976340",
             "49420", "200569", "444797", "811980", "110588", "662729", "555827", "858731", "830311", "150301",
             "115842", "508736", "753606", "831176", "710376", "414925", "65846", "642689", "446061", "645398",
             "813024", "564103", "373572", "518142", "316155", "439048", "134135", "623435", "906258", "483497",
             "396950")
    pairs = [str(precision / f"{kind}-{seed}-verdicts.md") for seed in seeds for kind in ("judge", "rejudge")]
    result = _run("--agreement", *pairs)
    assert result.returncode == 0, result.stderr
    assert "over 41 samples: what judge A judged correct would be judged 1313/1409 = 93.2% by judge B" in result.stdout
    assert "over 41 samples: what judge B judged correct would be judged 1313/1550 = 84.7% by judge A" in result.stdout
    assert "would score 84.7-93.2%" in " ".join((ROOT / "README.md").read_text().split())
    assert _run("--agreement", pairs[0]).returncode != 0


def test_the_readme_quotes_the_range_of_every_agreement():
    """The README gives the spread of the pairs' agreement and kappa; a new double judgement that
    widens it must change the README."""
    rejudged = sorted((ROOT / "docs" / "precision").glob("rejudge-*-verdicts.md"))
    files = [str(p) for path in rejudged for p in (path.with_name(path.name.replace("rejudge-", "judge-")), path)]
    result = _run("--agreement", *files)
    assert result.returncode == 0, result.stderr
    agreements = [float(line.split(" = ")[1].split("%")[0]) for line in result.stdout.splitlines()
                  if "judged twice: agreement" in line]
    kappas = [float(line.rsplit("kappa ", 1)[1]) for line in result.stdout.splitlines() if "Cohen's kappa" in line]
    assert len(agreements) == len(kappas) == len(rejudged) == 41, rejudged
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (f"forty-one samples again and agreed on {min(agreements):.0f}-{max(agreements):.0f}% of each "
            f"(Cohen's kappa {min(kappas):.2f}-{max(kappas):.2f})") in readme


def test_the_split_by_file_kind():
    result = _run("--by-file-kind")
    assert result.returncode == 0, result.stderr
    assert "app-shaped: 301/628 = 47.9%; 95% Wilson 44.0%-51.8%" in result.stdout
    assert "library module: 1230/3318 = 37.1%; 95% Wilson 35.4%-38.7%" in result.stdout
    assert "test: 121/284 = 42.6%" in result.stdout
    assert "app-shaped files (examples, scripts, tools, `train*.py`): 301/628 = 47.9%" in " ".join(
        (ROOT / "docs" / "scan.md").read_text().split())
    sys.path.insert(0, str(SCRIPT.parent))
    from precision_pooled import file_kind

    assert [file_kind(p) for p in ("pkg/examples/mnist.py", "mmedit/.mim/tools/test.py", "repo/train_gan.py",
                                   "pkg/tests/test_x.py", "pkg/conftest.py", "pkg/models/resnet.py",
                                   "pkg/testing/utils.py")] == [
        "app-shaped", "app-shaped", "app-shaped", "test", "test", "library module", "library module"]
