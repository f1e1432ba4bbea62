"""torchport compare on real result files made by real evaluations
(conftest.machine_results): ratios and costs against values computed here
from the raw block samples, what is not comparable and why, the CI gate."""
import json
import shutil
import statistics

import pytest

from conftest import run_torchport
from torchport import summary
from torchport.records import BackendEntry

def labels(files, *names):
    return [arg for name in names for arg in ("--label", f"{files[name]}={name}")]


def per_step_times(document, backend):
    return [block["seconds"] / block["steps"]
            for run in document["backends"][backend]["runs"] if run["status"] == "ok"
            for block in run["training"]["sustained"]["blocks"]]


def samples_per_step(document, backend):
    blocks = [block for run in document["backends"][backend]["runs"] if run["status"] == "ok"
              for block in run["training"]["sustained"]["blocks"]]
    return sum(b["samples"] for b in blocks) / sum(b["steps"] for b in blocks)


def test_ratios_costs_and_what_is_not_comparable(machine_results, tmp_path):
    files = machine_results
    out = tmp_path / "comparison.json"
    completed = run_torchport("compare", str(files["laptop"]), str(files["gpubox"]), str(files["wide"]),
                              *labels(files, "laptop", "gpubox", "wide"), "--json", str(out),
                              "--markdown", str(tmp_path / "c.md"), "--html", str(tmp_path / "c.html"))
    assert completed.returncode == 0, completed.stderr
    comparison = json.loads(out.read_text())
    assert comparison["reference"]["machine"] == "laptop" and comparison["reference"]["backend"] == "cpu"
    entries = {(e["machine"], e["backend"]): e for e in comparison["entries"]}
    laptop = json.loads(files["laptop"].read_text())
    gpubox = json.loads(files["gpubox"].read_text())

    # The ratio: reference median time / candidate median time over all raw block samples.
    candidate = entries[("gpubox", "cpu-compile")]
    assert candidate["comparable"] and candidate["reason"] is None
    expected = statistics.median(per_step_times(laptop, "cpu")) / statistics.median(per_step_times(gpubox, "cpu-compile"))
    assert candidate["ratio"]["speedup"] == pytest.approx(expected, rel=1e-12)
    low, high = candidate["ratio"]["ci95"]
    assert low <= candidate["ratio"]["speedup"] <= high
    # The interval is evaluate's unpaired bootstrap (one implementation, seeded): the same figures.
    ratio = summary.comparison(BackendEntry.from_dict(gpubox["backends"]["cpu-compile"]),
                               BackendEntry.from_dict(laptop["backends"]["cpu"]))
    assert ratio is not None and candidate["ratio"] == ratio.to_dict()
    assert candidate["ratio"]["practical_threshold"] == 0.05
    assert entries[("laptop", "cpu")]["reference"] and entries[("laptop", "cpu")]["ratio"] is None

    # Cost per 1M samples with each result's own price, from the sustained throughput.
    for (machine, backend), document, price in ((("laptop", "cpu"), laptop, 0.10), (("gpubox", "cpu-compile"), gpubox, 0.30)):
        throughput = samples_per_step(document, backend) / statistics.median(per_step_times(document, backend))
        cost = entries[(machine, backend)]["cost"]
        assert entries[(machine, backend)]["price_usd_per_hour"] == price
        assert cost["usd_per_million_samples"] == pytest.approx(price / 3600 * 1e6 / throughput, rel=1e-9)
        low, high = cost["usd_per_million_samples_ci95"]
        assert low <= cost["usd_per_million_samples"] <= high

    # Another batch shape: listed with the reason, left out of the ratios.
    wide = entries[("wide", "cpu")]
    assert not wide["comparable"] and wide["ratio"] is None
    assert "batch shapes differ" in wide["reason"] and "32" in wide["reason"]
    listed = [item for item in comparison["not_comparable"] if item["machine"] == "wide"]
    assert listed and "batch shapes differ" in listed[0]["reason"]
    assert "not comparable: wide:cpu: batch shapes differ" in completed.stdout

    # The same figures in every output.
    markdown = (tmp_path / "c.md").read_text()
    assert "| laptop | cpu |" in markdown and "batch shapes differ" in markdown
    page = (tmp_path / "c.html").read_text()
    assert 'data-chart="cost"' in page and "gpubox · cpu-compile" in page


def test_price_override_and_machine_names(machine_results, tmp_path):
    files = machine_results
    out = tmp_path / "c.json"
    completed = run_torchport("compare", str(files["laptop"]), str(files["gpubox"]), "--json", str(out),
                              "--price", "laptop:cpu=2.0", *labels(files, "laptop"))
    assert completed.returncode == 0, completed.stderr
    comparison = json.loads(out.read_text())
    entries = {(e["machine"], e["backend"]): e for e in comparison["entries"]}
    assert entries[("laptop", "cpu")]["price_usd_per_hour"] == 2.0
    assert entries[("laptop", "cpu")]["price_source"] == "--price"
    # Without a label a machine is named from its environment record; two files from
    # one host are two machines, numbered.
    host = json.loads(files["gpubox"].read_text())["environment"]["hostname"]
    assert (host, "cpu-compile") in entries
    assert comparison["environment_differences"] == []  # same machine, same environment


def test_fail_on_regression_exit_status_both_ways(machine_results):
    files = machine_results
    args = [str(files["laptop"]), str(files["slow"]), *labels(files, "laptop", "slow")]
    # The step that sleeps 20 ms is far slower than the reference, with significance.
    gated = run_torchport("compare", *args, "--fail-on-regression", "10")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "regression: slow:cpu is" in gated.stdout
    # Compared the other way round (the slow machine as the reference) nothing regressed.
    reversed_ = run_torchport("compare", *args, "--reference", "slow:cpu", "--fail-on-regression", "10")
    assert reversed_.returncode == 0, reversed_.stdout + reversed_.stderr
    assert "regression:" not in reversed_.stdout
    # And a threshold beyond the measured slowdown does not fire either.
    lenient = run_torchport("compare", *args, "--fail-on-regression", "1000000")
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr


def test_folders_and_other_schema_versions(machine_results, tmp_path):
    folder = tmp_path / "results"
    for name in ("laptop", "gpubox"):
        (folder / name).mkdir(parents=True)
        shutil.copy(machine_results[name], folder / name / "result.json")
    old = json.loads(machine_results["laptop"].read_text())
    old["schema_version"] = "0.9"
    (folder / "old").mkdir()
    (folder / "old" / "result.json").write_text(json.dumps(old))
    out = tmp_path / "c.json"
    completed = run_torchport("compare", str(folder), "--json", str(out))
    assert completed.returncode == 0, completed.stderr
    comparison = json.loads(out.read_text())
    assert len(comparison["machines"]) == 3
    reasons = [item["reason"] for item in comparison["not_comparable"] if item["backend"] is None]
    assert len(reasons) == 1 and "schema version '0.9'" in reasons[0]


@pytest.mark.parametrize("args, fragment", [
    (["{missing}"], "result file not found"),
    (["{laptop}", "--reference", "nowhere:cpu"], "reference nowhere:cpu has no measurement"),
    (["{laptop}", "--reference", "cpu"], "expected MACHINE:BACKEND"),
    (["{laptop}", "--price", "x:cpu=free"], "invalid price 'free'"),
    (["{laptop}", "--label", "/nonexistent/result.json=x"], "--label names a file that is not compared"),
    (["{laptop}", "--fail-on-regression", "-5"], "--fail-on-regression must be"),
    (["{garbage}"], "not a JSON result document"),
])
def test_bad_input_is_one_line(machine_results, tmp_path, args, fragment):
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    values = {"laptop": str(machine_results["laptop"]), "missing": str(tmp_path / "none.json"), "garbage": str(garbage)}
    completed = run_torchport("compare", *[a.format(**values) for a in args])
    assert completed.returncode == 2, completed.stdout + completed.stderr
    errors = [line for line in completed.stderr.splitlines() if line.startswith("torchport: error:")]
    assert len(errors) == 1 and fragment in errors[0], completed.stderr
    assert "Traceback" not in completed.stderr


def test_another_app_is_not_comparable(machine_results, builtin_evaluation, tmp_path):
    out = tmp_path / "c.json"
    completed = run_torchport("compare", str(machine_results["laptop"]), str(builtin_evaluation / "result.json"),
                              "--json", str(out))
    assert completed.returncode == 0, completed.stderr
    reasons = {(i["backend"]): i["reason"] for i in json.loads(out.read_text())["not_comparable"]}
    assert reasons["cpu"].startswith("different app:") and "'builtin:classifier'" in reasons["cpu"]
    assert "batch shapes differ" in reasons["cpu-compile"]


def test_config_difference_names_dtype_and_steps(machine_results):
    from torchport.compare import config_difference

    run = json.loads(machine_results["laptop"].read_text())["backends"]["cpu"]["runs"][0]
    other = json.loads(json.dumps(run["config"]))
    other["protocol"].update(dtype="bfloat16", steps=16)
    text = config_difference(other, run["config"], "app.py", "app.py")
    assert "dtype 'bfloat16' vs 'float32'" in text and "steps 16 vs 8" in text and "app" not in text


@pytest.fixture(scope="module")
def planted_slowdown(tmp_path_factory):
    """The same app measured as it is (every step sleeps 10 ms) and with a planted
    2x slowdown (20 ms), each with 3 fresh processes and with 1."""
    from conftest import COMPARE_APP, _evaluate

    root = tmp_path_factory.mktemp("planted")
    protocol = ["--steps", "8", "--blocks", "4", "--max-warmup", "4", "--no-inference", "--no-trace", "--no-checks"]
    made = {}
    for name, sleep_s, repeats in [("base3", "0.01", "3"), ("double3", "0.02", "3"),
                                   ("base1", "0.01", "1"), ("double1", "0.02", "1")]:
        made[name] = _evaluate(root / name, str(COMPARE_APP), "-b", "cpu", "--repeats", repeats, *protocol,
                               env={"COMPARE_TINY_SLEEP_S": sleep_s})
    return made


def test_gate_fails_on_a_planted_2x_slowdown_with_3_processes_per_side(planted_slowdown, tmp_path):
    files = planted_slowdown
    out = tmp_path / "gate.json"
    gated = run_torchport("compare", str(files["base3"]), str(files["double3"]), *labels(files, "base3", "double3"),
                          "--fail-on-regression", "10", "--json", str(out))
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "regression: double3:cpu is" in gated.stdout
    entry = next(e for e in json.loads(out.read_text())["entries"] if e["machine"] == "double3")
    assert entry["ratio"]["runs"] == 3 and entry["ratio"]["significant"]
    assert entry["ratio"]["verdict"] == "slower"
    assert 1.6 < 1 / entry["ratio"]["speedup"] < 2.4


def test_one_process_per_side_is_never_significant_and_never_gates(planted_slowdown, tmp_path):
    files = planted_slowdown
    out = tmp_path / "single.json"
    completed = run_torchport("compare", str(files["base1"]), str(files["double1"]), *labels(files, "base1", "double1"),
                              "--fail-on-regression", "10", "--json", str(out))
    # The slowdown is real, but one process per side cannot show it beyond within-run noise.
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "regression:" not in completed.stdout
    assert "not gated: double1:cpu looks" in completed.stdout and "within-run noise only" in completed.stdout
    comparison = json.loads(out.read_text())
    entry = next(e for e in comparison["entries"] if e["machine"] == "double1")
    assert entry["ratio"]["runs"] == 1 and not entry["ratio"]["significant"]
    assert "not a verdict" in entry["ratio"]["verdict"]
    assert comparison["regressions"] == [] and comparison["regressions_not_gated"][0]["machine"] == "double1"
    # Nor does one side with 1 process against 3 on the other.
    mixed = run_torchport("compare", str(files["base3"]), str(files["double1"]), *labels(files, "base3", "double1"),
                          "--fail-on-regression", "10")
    assert mixed.returncode == 0 and "not gated: double1:cpu" in mixed.stdout, mixed.stdout + mixed.stderr
