"""report.html and compare --html, looked at in a real headless browser
(Debian's chromium): no console errors, no network requests, every chart
drawn, the key figures on the page; hostile strings from a result render as
text and run nothing."""
import base64
import html
import json
import os
import shutil
from pathlib import Path

import pytest

from browser import Browser, find_chromium
from conftest import run_torchport
from torchport import formatting as fmt
from torchport.records import BackendComparison, Stat

# Charts every full evaluation of the built-in app draws (cpu + cpu-compile, with trace and checks).
EVALUATION_CHARTS = ["phases", "step-time", "warmup-0", "warmup-1", "spread", "loss", "parity-loss", "compile",
                     "checks", "op-support", "memory-fit"]
COMPARISON_CHARTS = ["step-time", "ratio", "cost", "first-step"]
HOSTILE = '<script>window.__pwned=1</script></svg></script>"&amp;<img src=x onerror="window.__pwned=2">&'

CHART_STATES = """[...document.querySelectorAll('figure.chart')].map(f => {
  const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : null;
  return {key: f.dataset.chart, state: f.dataset.state, text: f.innerText,
          shapes: svg ? svg.querySelectorAll('rect,path,circle,line').length : 0,
          width: box ? box.width : 0, height: box ? box.height : 0};
})"""


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    if executable is None:
        pytest.skip("no chromium here (Debian: apt-get install chromium; `make test` installs it where it can, "
                    "or set TORCHPORT_CHROMIUM=PATH): the HTML pages were not checked in a browser")
    with Browser(executable) as instance:
        yield instance


def embedded(page_text: str, element_id: str) -> dict:
    opening = f'<script type="application/json" id="{element_id}">'
    start = page_text.index(opening) + len(opening)
    return json.loads(page_text[start:page_text.index("</script>", start)])


def assert_clean_page(browser, path: Path, charts: list[str]) -> dict:
    browser.open(path)
    assert browser.console_errors() == []
    assert browser.requests() == [path.resolve().as_uri()], "the page requested something besides itself"
    states = {chart["key"]: chart for chart in browser.evaluate(CHART_STATES)}
    for key in charts:
        chart = states.get(key)
        assert chart is not None, f"chart {key} missing; have {sorted(states)}"
        assert chart["state"] == "drawn" and chart["shapes"] > 2, chart
        assert chart["width"] > 100 and chart["height"] > 30, chart
    # Nothing on the page runs: the only script element is the embedded data.
    assert browser.evaluate("[...document.scripts].map(s => s.type)") == ["application/json"]
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    return states


def test_evaluate_writes_report_html(builtin_evaluation):
    page = (builtin_evaluation / "report.html").read_text()
    assert len(page.encode()) < 500_000
    document = json.loads((builtin_evaluation / "result.json").read_text())
    assert embedded(page, "torchport-result")["backends"].keys() == document["backends"].keys()
    for key in EVALUATION_CHARTS + ["compile"]:
        assert f'data-chart="{key}"' in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "").split("<script")[0]
    # `torchport report --html` renders the same page from the saved result.
    out = builtin_evaluation / "again.html"
    completed = run_torchport("report", str(builtin_evaluation / "result.json"), "--html", str(out))
    assert completed.returncode == 0, completed.stderr
    assert out.read_text().count('class="chart"') == page.count('class="chart"')


def test_report_html_in_a_browser(builtin_evaluation, browser, tmp_path):
    path = builtin_evaluation / "report.html"
    states = assert_clean_page(browser, path, EVALUATION_CHARTS)
    # cpu-compile's torch.compile counters are charted (Dynamo frames per phase); eager cpu has none.
    assert states["compile"]["state"] == "drawn" and states["compile"]["shapes"] > 2, states["compile"]
    assert "cpu-compile: Dynamo frames" in states["compile"]["text"]
    assert "cpu: " not in states["compile"]["text"].replace("cpu-compile: ", "")
    document = json.loads((builtin_evaluation / "result.json").read_text())
    text = browser.evaluate("document.body.innerText")
    for backend in document["backends"].values():
        assert fmt.step_time_with_ci(Stat.from_dict(backend["summary"]["step_time_s"])) in text
    assert fmt.usd(document["backends"]["cpu"]["cost"]["usd_per_million_samples"]) in text
    assert browser.evaluate("JSON.parse(document.getElementById('torchport-result').textContent).app.spec") == \
        "builtin:classifier"
    shot = tmp_path / "report.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 20_000
    # Printable: the browser lays it out as PDF pages, charts kept whole.
    pdf = base64.b64decode(browser.call("Page.printToPDF", printBackground=True)["data"])
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 2
    _keep_screenshot(shot, "report.png")


def test_comparison_html_in_a_browser(machine_results, browser, tmp_path):
    files = machine_results
    out = tmp_path / "comparison.html"
    completed = run_torchport("compare", str(files["laptop"]), str(files["gpubox"]), str(files["wide"]),
                              "--label", f"{files['laptop']}=laptop", "--label", f"{files['gpubox']}=gpubox",
                              "--label", f"{files['wide']}=wide", "--html", str(out), "--json", str(tmp_path / "c.json"))
    assert completed.returncode == 0, completed.stderr
    assert_clean_page(browser, out, COMPARISON_CHARTS)
    comparison = json.loads((tmp_path / "c.json").read_text())
    text = browser.evaluate("document.body.innerText")
    entry = next(e for e in comparison["entries"] if e["machine"] == "gpubox")
    assert fmt.speedup(BackendComparison.from_dict(entry["ratio"])) in text
    assert fmt.usd(entry["cost"]["usd_per_million_samples"]) in text
    assert "batch shapes differ" in text
    shot = tmp_path / "comparison.png"
    browser.screenshot(shot)
    _keep_screenshot(shot, "comparison.png")


def hostile_copy(source: Path, folder: Path) -> Path:
    """A real result whose app name, a backend name and error texts are hostile."""
    document = json.loads(source.read_text())
    document["app"]["spec"] = f"app {HOSTILE}"
    backends = document["backends"]
    renamed = f"cpu-compile{HOSTILE}"
    backends[renamed] = backends.pop("cpu-compile")
    backends[renamed]["name"] = renamed
    backends[renamed]["error"] = {"kind": "compile-error", "message": f"boom {HOSTILE}", "location": f"x.py:1 {HOSTILE}"}
    backends[renamed]["runs"][-1]["stderr_tail"] = [f"Traceback {HOSTILE}"]
    for check in (document.get("checks") or {}).get("checks") or []:
        check["reason"] = f"{check.get('reason')} {HOSTILE}"
        if check.get("backend") == "cpu-compile":
            check["backend"] = renamed
    document["environment"]["hostname"] = f"host {HOSTILE}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "result.json"
    path.write_text(json.dumps(document))
    return path


def test_hostile_strings_are_escaped_in_the_source(builtin_evaluation, tmp_path):
    """Without a browser too: no hostile markup survives into the page's source,
    and the embedded JSON parses back to the hostile strings."""
    result = hostile_copy(builtin_evaluation / "result.json", tmp_path / "hostile")
    page = tmp_path / "hostile.html"
    completed = run_torchport("report", str(result), "--html", str(page))
    assert completed.returncode == 0, completed.stderr
    raw = page.read_text()
    assert "<script>window" not in raw and "<img" not in raw and "</svg></script>" not in raw
    assert raw.count("<script") == 1 and raw.count("</script>") == 1
    assert html.escape(f"boom {HOSTILE}") in raw
    assert embedded(raw, "torchport-result")["app"]["spec"] == f"app {HOSTILE}"


def test_hostile_strings_render_as_text(builtin_evaluation, browser, tmp_path):
    result = hostile_copy(builtin_evaluation / "result.json", tmp_path / "hostile")
    page = tmp_path / "hostile.html"
    completed = run_torchport("report", str(result), "--html", str(page))
    assert completed.returncode == 0, completed.stderr
    raw = page.read_text()
    assert "<script>window" not in raw and "<img" not in raw
    assert_clean_page(browser, page, EVALUATION_CHARTS)
    text = browser.evaluate("document.body.innerText")
    assert f"app {HOSTILE}" in text and f"boom {HOSTILE}" in text
    assert browser.evaluate("document.title") == f"torchport evaluation: app {HOSTILE}"
    # Chart labels carry the backend name as text (clipped to fit), inside the SVG.
    labels = browser.evaluate("[...document.querySelectorAll('#chart-step-time svg text')].map(t => t.textContent)")
    assert any(label.startswith("cpu-compile<script>") for label in labels), labels
    # The embedded document survives the trip: the same strings, parsed back.
    assert browser.evaluate("JSON.parse(document.getElementById('torchport-result').textContent).app.spec") == \
        f"app {HOSTILE}"

    # And through compare, with a hostile machine label as well.
    compared = tmp_path / "hostile-compare.html"
    completed = run_torchport("compare", str(result), "--label", f"{result}=m {HOSTILE}",
                              "--html", str(compared), "--markdown", str(tmp_path / "hostile.md"))
    assert completed.returncode == 0, completed.stderr
    assert_clean_page(browser, compared, ["step-time", "ratio", "first-step"])
    text = browser.evaluate("document.body.innerText")
    assert f"m {HOSTILE}" in text
    markdown = (tmp_path / "hostile.md").read_text()
    assert "<script>" not in markdown and html.escape("<script>") in markdown


def _keep_screenshot(shot: Path, name: str) -> None:
    """TORCHPORT_SCREENSHOTS=DIR keeps the screenshots (docs/ holds one)."""
    folder = os.environ.get("TORCHPORT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(folder) / name)


def test_charts_and_answer_as_a_browser_lays_them_out(builtin_evaluation, browser):
    """Every chart label inside its chart, no negative tick on an axis of times or
    counts, whole-number ticks on count axes, and the answer per target first."""
    browser.open(builtin_evaluation / "report.html")
    outside = browser.evaluate("""(() => {
        const bad = [];
        for (const svg of document.querySelectorAll('svg')) {
          const box = svg.getBoundingClientRect();
          for (const t of svg.querySelectorAll('text')) {
            const r = t.getBoundingClientRect();
            if (r.width && (r.left < box.left - 1 || r.right > box.right + 1)) bad.push(t.textContent);
          }
        }
        return bad; })()""")
    assert outside == [], outside
    ticks = browser.evaluate("Array.from(document.querySelectorAll('text.tick')).map(t => t.textContent)")
    assert ticks and not [t for t in ticks if t.startswith("-")], ticks
    compile_ticks = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-chart=\"compile\"] text.tick')).map(t => t.textContent)")
    assert compile_ticks and all(t.isdigit() for t in compile_ticks) and len(set(compile_ticks)) == len(compile_ticks)
    headings = browser.evaluate("Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
    assert headings.index("Answer per target") < headings.index("Verdict per backend")
    rows = browser.evaluate("Array.from(document.querySelectorAll('table.answer tbody tr')).map(r => r.innerText)")
    assert any(row.startswith("compiled CPU") and "[M] runs" in row for row in rows), rows


# --- the chart properties on a report with failures, a script run and a memory fit --------------

FAULT_APP = Path(__file__).resolve().parent / "apps" / "faults" / "compile_error.py"
SCRIPT = Path(__file__).resolve().parent / "scripts" / "agnostic.py"
SMALL = ["-b", "cpu,cpu-compile", "--repeats", "1", "--steps", "6", "--blocks", "2", "--max-warmup", "6", "-q"]

# Per drawn chart: its tick texts, its text labels outside the drawing, its column labels (a label wraps onto
# lines that share an x), and the fills of everything that stands for "unsupported" or a failure.
CHART_PROPERTIES = """[...document.querySelectorAll('figure.chart[data-state="drawn"]')].map(f => {
  const svg = f.querySelector('svg'); const box = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')];
  const columns = {};
  for (const t of svg.querySelectorAll('text.column-label')) {
    const x = t.getAttribute('x'); columns[x] = (columns[x] ? columns[x] + ' ' : '') + t.textContent; }
  const bad = [...svg.querySelectorAll('rect')].filter(r => {
    const title = r.querySelector('title'); const next = r.nextElementSibling;
    return (title && /: unsupported /.test(title.textContent)) || r.matches('.cell-fail, .cell-error')
      || (next && next.tagName === 'text' && next.textContent === 'unsupported'); });
  return {key: f.dataset.chart,
          ticks: [...svg.querySelectorAll('text.tick')].map(t => t.textContent),
          outside: texts.filter(t => { const r = t.getBoundingClientRect();
            return r.width && (r.left < box.left - 1 || r.right > box.right + 1
                               || r.top < box.top - 1 || r.bottom > box.bottom + 1); }).map(t => t.textContent),
          columns: Object.values(columns),
          bad_fills: bad.map(r => getComputedStyle(r).fill)};
})"""
COUNT_CHARTS = ("compile", "op-support")


def is_green(fill: str) -> bool:
    """A computed fill (rgb(r, g, b)) whose hue is green and saturated enough to read as green."""
    import colorsys
    import re

    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", fill)[:3])
    hue, lightness, saturation = colorsys.rgb_to_hls(r, g, b)
    return 80 <= hue * 360 <= 170 and saturation > 0.25 and 0.1 < lightness < 0.95


def tick_value(text: str) -> float:
    """The number a tick shows ("0", "250 µs", "1.5 ms", "100%", "3"), for its sign and size."""
    import re

    match = re.match(r"[-−]?\d+(\.\d+)?", text.strip())
    assert match, text
    return float(match.group(0).replace("−", "-"))


@pytest.fixture(scope="module")
def failing_and_script_reports(tmp_path_factory):
    """Two real evaluations, run side by side: an app that cpu-compile cannot compile (a failed backend,
    failed checks, a memory fit from the trace) and a script run on both backends."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("chart-properties")
    commands = {
        "failing": ["evaluate", str(FAULT_APP), *SMALL, "--no-inference", "--out-dir", str(root / "failing")],
        "script": ["evaluate", "--script", str(SCRIPT), *SMALL, "--out-dir", str(root / "script"), "--",
                   "--device={device}", "--compile={compile}", "--workers=0"],
    }
    started = {name: subprocess.Popen([sys.executable, "-m", "torchport.cli", *arguments], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "120"})
               for name, arguments in commands.items()}
    for name, process in started.items():
        _, stderr = process.communicate(timeout=600)
        assert (root / name / "report.html").is_file(), stderr[-3000:]
    return root / "failing", root / "script"


def test_chart_properties_on_a_report_with_failures_a_script_run_and_a_memory_fit(failing_and_script_reports,
                                                                                  browser):
    failing, script = failing_and_script_reports
    failing_document = json.loads((failing / "result.json").read_text())
    assert failing_document["backends"]["cpu-compile"]["status"] == "error"
    assert json.loads((script / "result.json").read_text())["script"]
    drawn = {}
    for folder in (failing, script):
        assert_clean_page(browser, folder / "report.html", [])
        for chart in browser.evaluate(CHART_PROPERTIES):
            drawn[f"{folder.name}:{chart['key']}"] = chart
    # What the properties are asserted on: the failure's check matrix, the memory fit, the script's counts.
    for key in ("failing:checks", "failing:memory-fit", "failing:op-support", "failing:step-time",
                "script:compile", "script:step-time", "script:phases", "script:loss"):
        assert key in drawn, sorted(drawn)
    for key, chart in drawn.items():
        assert chart["outside"] == [], (key, chart["outside"])  # labels measured, never clipped
        # Times, shares, counts and these apps' losses are never below zero: nor is any axis.
        assert all(tick_value(tick) >= 0 for tick in chart["ticks"]), (key, chart["ticks"])
        assert len(set(chart["columns"])) == len(chart["columns"]), (key, chart["columns"])
        assert not [fill for fill in chart["bad_fills"] if is_green(fill)], (key, chart["bad_fills"])
        if key.split(":")[1] in COUNT_CHARTS:
            assert chart["ticks"] and all(tick.isdigit() for tick in chart["ticks"]), (key, chart["ticks"])
            assert len(set(chart["ticks"])) == len(chart["ticks"]), (key, chart["ticks"])
    assert drawn["failing:checks"]["columns"]
    assert drawn["failing:op-support"]["bad_fills"]  # the "unsupported" key was found, and its colour judged
    # Memory bars on the chip's capacity: the axis reaches 100%, so a small step looks small.
    assert max(tick_value(tick) for tick in drawn["failing:memory-fit"]["ticks"]) >= 100
    assert is_green("rgb(0, 158, 115)") and not is_green("rgb(213, 94, 0)")  # the test's own yardstick
