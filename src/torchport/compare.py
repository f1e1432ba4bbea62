"""``torchport compare``: results from several machines, side by side.

Each result file is one machine's evaluation.  Entries (machine, backend) are
matched with the reference by app and effective-configuration hash; anything
that does not match is listed with the reason and kept out of the ratios.
Every figure comes from ``torchport.summary`` over the raw samples of each
file (ratios: the same unpaired bootstrap and 5% threshold as ``evaluate``);
nothing here computes a statistic of its own.

The comparison is itself a JSON document (``KIND``), which the terminal,
markdown and HTML renderers read.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchport import __version__, summary
from torchport.document import READABLE_SCHEMA_VERSIONS, check_schema, now, read_json, readable, result_record
from torchport.errors import UserError
from torchport.prices import Prices, PriceSource, parse_machine_price, split_machine_key
from torchport.records import (
    BackendEntry,
    BackendStatus,
    CheckOutcomes,
    CheckStatus,
    ComparedEnvironment,
    ComparedMachine,
    ComparisonDocument,
    ComparisonEntry,
    ComparisonReference,
    EnvironmentDifference,
    MachineEnvironment,
    NotComparable,
    Regression,
    ResultDocument,
    StepTimeInterval,
    Summary,
)
from torchport.stats import MIN_RUNS_FOR_VERDICT

KIND = "torchport-comparison"
VERSION = "1.0"

# Fields of the environment record shown side by side (the ones that change a figure).
ENVIRONMENT_FIELDS = ("hostname", "accelerators", "driver", "torch", "torch_cuda", "torch_hip", "python",
                      "cpu", "cpu_count", "memory_bytes", "platform")

# What a result of another schema version is read for (its machine's name and row), and each one's JSON type.
FOREIGN_FIELDS: dict[str, type] = {"schema_version": str, "status": str, "updated": str, "app": dict, "environment": dict}

# Names for the fields of a run's effective configuration (protocol.py) when they differ.
CONFIG_FIELD_NAMES = {"app": "different app", "first_batch": "batch shapes differ", "parameters": "parameter count differs",
                      "parameter_dtype": "parameter dtype differs", "model": "different model class",
                      "optimizer": "different optimizer", "optimizer_defaults": "optimizer settings differ"}


@dataclass
class Source:
    path: Path
    # One of another schema version is kept too, with its problem: only what names its machine is read from it.
    document: ResultDocument
    problem: str | None = None
    machine: str = ""

    def prices(self) -> Prices:
        return Prices.of(self.document.prices, PriceSource.RESULT)


def result_files(paths: list[Path]) -> list[Path]:
    """The result files named, folders searched for ``result.json``, in order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.rglob("result.json"))
            if not inside:
                raise UserError("no result.json in this folder", location=str(path))
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise UserError(f"result file not found: {path}")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique


def load(path: Path) -> Source:
    """A result file; one of another schema version is kept, as not comparable."""
    raw = read_json(path)
    if "backends" not in raw or "environment" not in raw:
        raise UserError("not a torchport result document (no backends or environment)", location=str(path))
    if not readable(raw):
        named = result_record({key: raw[key] for key in FOREIGN_FIELDS if isinstance(raw.get(key), FOREIGN_FIELDS[key])})
        return Source(path, named, f"torchport result schema version {str(raw.get('schema_version'))[:40]!r}, "
                                   f"this torchport compares {', '.join(map(repr, READABLE_SCHEMA_VERSIONS))}")
    check_schema(raw, str(path))
    try:
        return Source(path, summary.refresh(result_record(raw)))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise UserError(f"malformed result document ({type(exc).__name__}: {exc}); "
                        "check it with `torchport report --validate`", location=str(path)) from None


def machine_name(environment: MachineEnvironment) -> str:
    host = environment.hostname or "unknown host"
    accelerators = sorted({a.name or a.type for a in environment.accelerators})
    return f"{host} ({', '.join(accelerators)})" if accelerators else host


def parse_labels(items: list[str]) -> dict[Path, str]:
    labels = {}
    for text in items:
        # Either side may contain "=": split at the first "=" whose left side is an existing path.
        splits = [i for i, char in enumerate(text) if char == "="]
        at = next((i for i in splits if Path(text[:i]).exists()), splits[0] if splits else -1)
        file, sep, name = (text[:at], "=", text[at + 1:]) if at >= 0 else (text, "", "")
        if not sep or not file or not name.strip():
            raise UserError(f"invalid --label {text!r}: expected FILE=NAME")
        labels[Path(file).resolve()] = name.strip()
    return labels


def _label_for(path: Path, labels: dict[Path, str]) -> str | None:
    for key, name in labels.items():
        if path == key or key in path.parents:
            return name
    return None


def name_machines(sources: list[Source], labels: dict[Path, str]) -> None:
    """Each file is a machine, named by its label, else its host name and accelerators;
    the same name twice gets a number (two evaluations on one host are two entries)."""
    used: dict[str, int] = {}
    for source in sources:
        base = _label_for(source.path, labels) or machine_name(source.document.environment)
        used[base] = used.get(base, 0) + 1
        source.machine = base if used[base] == 1 else f"{base} #{used[base]}"
    unused = [str(key) for key in labels if not any(_label_for(s.path, {key: ""}) is not None for s in sources)]
    if unused:
        raise UserError(f"--label names a file that is not compared: {unused[0]}")


def machine_prices(items: list[str]) -> dict[str, Prices]:
    """compare's --price MACHINE:BACKEND=USD_PER_HOUR, by machine."""
    by_machine: dict[str, Prices] = {}
    for text in items:
        machine, price = parse_machine_price(text)
        by_machine[machine] = by_machine.get(machine, Prices()).add([price])
    return by_machine


def _run_config(backend: BackendEntry) -> tuple[str | None, dict[str, Any]]:
    """The effective configuration of the backend's first successful run (from its summary)."""
    if backend.summary is None:
        return None, {}
    config = backend.summary.config
    return backend.summary.config_hash, config.to_dict() if config else {}


def config_difference(candidate: dict[str, Any], reference: dict[str, Any], candidate_app: str,
                      reference_app: str) -> str:
    """What differs between two effective configurations, in words.  The app is
    named as each result names it (a run's config holds None for the default app)."""
    candidate = {**candidate, "app": candidate_app}
    reference = {**reference, "app": reference_app}
    reasons = []
    for key in sorted(set(candidate) | set(reference)):
        if candidate.get(key) == reference.get(key):
            continue
        if key == "protocol":
            mine, theirs = candidate.get(key) or {}, reference.get(key) or {}
            for setting in sorted(set(mine) | set(theirs)):
                if mine.get(setting) != theirs.get(setting):
                    reasons.append(f"{setting} {mine.get(setting)!r} vs {theirs.get(setting)!r}")
        elif key in ("app", "first_batch"):
            reasons.append(f"{CONFIG_FIELD_NAMES[key]}: {candidate.get(key)!r} vs {reference.get(key)!r}")
        else:
            reasons.append(CONFIG_FIELD_NAMES.get(key, f"{key} differs"))
    return "; ".join(reasons) or "different effective-configuration hash"


def check_outcomes(document: ResultDocument, backend: str) -> CheckOutcomes:
    """Pass/fail counts of the checks that concern one backend (alone or in a pair)."""
    counts: dict[str, int] = {}
    failed = []
    for check in document.check_records():
        subject = check.backend or check.pair or ""
        if not (subject == backend or backend in _pair_members(subject)):
            continue
        counts[str(check.status)] = counts.get(str(check.status), 0) + 1
        if check.status in (CheckStatus.FAIL, CheckStatus.ERROR):
            failed.append(f"{check.name} {subject}")
    return CheckOutcomes(counts=counts, failed=failed)


def _pair_members(subject: str) -> list[str]:
    for arrow in ("->", "→", " to "):
        if arrow in subject:
            return [part.strip() for part in subject.split(arrow)]
    return []


def _entry(source: Source, name: str, backend: BackendEntry, s: Summary) -> ComparisonEntry:
    """One measured backend of one result file, in the comparison."""
    phases = [s.process_start_s, s.import_s, s.init_s]
    device_memory = s.peak_device_memory_bytes
    return ComparisonEntry(
        machine=source.machine,
        backend=name,
        file=str(source.path),
        app=source.document.app_spec,
        proxy_for=backend.proxy_for,
        status=str(backend.status),
        config_hash=s.config_hash,
        runs_ok=s.runs_ok,
        step_time_s=StepTimeInterval(median=s.step_time_s.median, ci95=s.step_time_s.ci95,
                                     warnings=s.step_time_s.warnings) if s.step_time_s else None,
        samples_per_s=s.samples_per_s,
        samples_per_s_ci95=s.samples_per_s_ci95,
        tokens_per_s=s.tokens_per_s,
        time_per_step_compile_included_s=s.time_per_step_compile_included_s,
        compile_included_steps=s.compile_included_steps,
        first_step_s=s.first_step_s,
        time_to_first_step_s=sum(p for p in phases if p) + (s.first_step_s or 0.0),
        peak_memory_bytes=device_memory if device_memory is not None else s.peak_host_rss_bytes,
        peak_memory_kind="device" if device_memory is not None else "host RSS",
        final_loss=s.final_loss,
        checks=check_outcomes(source.document, name),
    )


def compare_results(paths: list[Path], labels: list[str] | None = None, reference: str | None = None,
                    prices: list[str] | None = None) -> ComparisonDocument:
    files = result_files(paths)
    sources = [load(path) for path in files]
    name_machines(sources, parse_labels(labels or []))
    flag_prices = machine_prices(prices or [])
    usable = [s for s in sources if s.problem is None]
    not_comparable = [NotComparable(machine=s.machine, backend=None, file=str(s.path), reason=s.problem)
                      for s in sources if s.problem]
    if not usable:
        raise UserError("none of the result files can be compared: " + "; ".join(s.problem or "" for s in sources))

    ref_backend: str | None
    if reference:
        ref_machine, ref_backend = split_machine_key(reference, "--reference")
    else:
        ref_machine, ref_backend = usable[0].machine, usable[0].document.reference
    ref_source = next((s for s in usable if s.machine == ref_machine), None)
    ref_entry = ref_source.document.backends.get(ref_backend) if ref_source and ref_backend else None
    if ref_source is None or ref_entry is None or ref_entry.summary is None:
        choices = ", ".join(f"{s.machine}:{name}" for s in usable for name, b in s.document.backends.items()
                            if b.summary)
        raise UserError(f"reference {ref_machine}:{ref_backend} has no measurement in these results; "
                        f"choose one with --reference MACHINE:BACKEND from: {choices or 'none'}")
    ref_hash, ref_config = _run_config(ref_entry)
    ref_app = ref_source.document.app_spec

    for machine, priced in flag_prices.items():
        for backend_name in priced.backends():
            if not any(s.machine == machine and backend_name in s.document.backends for s in usable):
                raise UserError(f"--price names {machine}:{backend_name}, which is not in these results")

    entries = []
    for source in usable:
        for name, backend in source.document.backends.items():
            if backend.summary is None:
                reason = backend.reason if backend.status in (BackendStatus.UNAVAILABLE, BackendStatus.SKIPPED) else \
                    (backend.error.message if backend.error else "") or "no successful run"
                not_comparable.append(NotComparable(machine=source.machine, backend=name, file=str(source.path),
                                                    reason=f"not measured ({backend.status}): {reason}"))
                continue
            entry = _entry(source, name, backend, backend.summary)
            config_hash, config = _run_config(backend)
            if config_hash is None or config_hash != ref_hash:
                entry.reason = config_difference(config, ref_config, source.document.app_spec, ref_app)
            else:
                entry.comparable = True
            is_reference = source is ref_source and name == ref_backend
            entry.reference = is_reference
            if entry.comparable and not is_reference:
                entry.ratio = summary.comparison(backend, ref_entry)
            if not entry.comparable:
                not_comparable.append(NotComparable(machine=source.machine, backend=name, file=str(source.path),
                                                    reason=entry.reason))
            price = flag_prices.get(source.machine, Prices()).get(name) or source.prices().get(name)
            if price is not None:
                entry.price_usd_per_hour, entry.price_source = price.usd_per_hour, price.source.value
                entry.cost = summary.cost(backend.summary, price.usd_per_hour)
            entries.append(entry)

    return ComparisonDocument(
        kind=KIND,
        version=VERSION,
        created=now(),
        tool={"name": "torchport", "version": __version__},
        reference=ComparisonReference(machine=ref_machine, backend=ref_backend, app=ref_app, config_hash=ref_hash),
        machines=[
            ComparedMachine(name=s.machine, file=str(s.path), app=s.document.app.spec,
                            status=None if s.document.status is None else str(s.document.status),
                            updated=s.document.updated, schema_version=s.document.schema_version,
                            environment=_environment_fields(s.document.environment))
            for s in sources
        ],
        entries=entries,
        not_comparable=not_comparable,
        environment_differences=environment_differences(sources),
    )


def environment_differences(sources: list[Source]) -> list[EnvironmentDifference]:
    """The environment fields whose value is not the same on every machine."""
    rows = []
    for field_name in ENVIRONMENT_FIELDS:
        values = {s.machine: _environment_text(getattr(_environment_fields(s.document.environment), field_name), field_name)
                  for s in sources}
        if len(set(values.values())) > 1:
            rows.append(EnvironmentDifference(field=field_name, values=values))
    return rows


def _environment_fields(environment: MachineEnvironment) -> ComparedEnvironment:
    """The fields that change a figure, as the document wrote them (None: not written)."""
    written = environment.to_dict()
    return ComparedEnvironment.from_dict({name: written.get(name) for name in ENVIRONMENT_FIELDS})


def _environment_text(value: Any, field_name: str) -> str:
    if value is None:
        return "n/a"
    if field_name == "accelerators":
        return ", ".join(a.name or a.type for a in value) or "none"
    if field_name == "memory_bytes":
        from torchport.formatting import size

        return size(value)
    return str(value)


def regressions(comparison: ComparisonDocument, percent: float) -> tuple[list[Regression], list[Regression]]:
    """Entries slower than the reference by more than ``percent`` with significance
    (the 95% interval of the speed ratio lies wholly below 1, from at least two
    processes per side), and the entries that looked slower by more than
    ``percent`` but could not gate, each with the reason."""
    found, not_gated = [], []
    for entry in comparison.entries:
        ratio = entry.ratio
        if not ratio:
            continue
        slower_by = 1 / ratio.speedup - 1
        if slower_by * 100 <= percent:
            continue
        item = Regression(machine=entry.machine, backend=entry.backend, slower_by=slower_by, ci95=ratio.ci95)
        runs = ratio.runs
        if runs < MIN_RUNS_FOR_VERDICT:
            not_gated.append(item.put(why=f"{runs} process per side: the interval covers within-run noise only; "
                                          f"use --repeats {MIN_RUNS_FOR_VERDICT} or more"))
        elif not (ratio.significant and ratio.ci95[1] < 1):
            not_gated.append(item.put(why="not significant: the 95% interval of the speed ratio reaches 1"))
        else:
            found.append(item)
    return found, not_gated
