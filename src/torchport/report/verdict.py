"""One line per backend that answers "does it run, and how well"."""
from __future__ import annotations

from torchport import formatting as fmt
from torchport.records import BackendEntry, BackendStatus, ErrorKind, RunStatus


def verdict_line(name: str, backend: BackendEntry, reference: str | None) -> str:
    proxy = f" [proxy for {backend.proxy_for}]" if backend.proxy_for else ""
    status = backend.status
    if status == BackendStatus.UNAVAILABLE:
        return f"{name}{proxy}: not available: {backend.reason}"
    if status == BackendStatus.SKIPPED:
        return f"{name}{proxy}: not run: {backend.reason}"
    summary, error = backend.summary, backend.error
    if summary is None and error is not None and error.kind == ErrorKind.NOT_ON_DEVICE:
        return f"{name}{proxy}: {error.message}"  # script mode: the message is the verdict
    if summary is None:
        where = f" ({error.location})" if error is not None and error.location else ""
        return f"{name}{proxy}: does not run: {status}: {error.message if error is not None else 'no result'}{where}"
    parts = [f"runs; sustained {fmt.step_time_with_ci(summary.step_time_s)} per step"]
    parts.append(fmt.rate(summary.samples_per_s, "samples"))
    if summary.tokens_per_s:
        parts.append(fmt.rate(summary.tokens_per_s, "tokens"))
    if name == reference:
        parts.append("reference")
    elif backend.comparison:
        from torchport.script.report import heavy_load

        loaded = [text for run in backend.runs if run.status == RunStatus.OK for text in [heavy_load(run)] if text]
        parts.append(f"vs {reference}: {fmt.speedup(backend.comparison)}"
                     + (f" (MEASURED UNDER HEAVY LOAD: {max(loaded)})" if loaded else ""))
    parts.append(f"first step {fmt.seconds(summary.first_step_s)}")
    if summary.peak_device_memory_bytes is not None:
        parts.append(f"peak device memory {fmt.size(summary.peak_device_memory_bytes)}")
    else:
        parts.append(f"peak host RSS {fmt.size(summary.peak_host_rss_bytes)}")
    if summary.input_bound:
        parts.append(f"INPUT-BOUND ({summary.data_wait_share or 0.0:.0%} waiting for data)")
    if summary.sustained_compilations:
        parts.append(f"RECOMPILING ({summary.sustained_compilations} in sustained steps)")
    elif summary.warmup_recompiling:
        parts.append(f"RECOMPILING in warm-up ({summary.warmup_recompiling.compilations} compilations)")
    if backend.cost:
        parts.append(f"{fmt.usd(backend.cost.usd_per_million_samples)} per 1M samples")
    if error is not None:
        parts.append(f"a later run failed: {error.message}")
    return f"{name}{proxy}: " + "; ".join(parts)
