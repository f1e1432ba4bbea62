"""One line per backend that answers "does it run, and how well"."""
from __future__ import annotations

from typing import Any

from torchport import formatting as fmt


def verdict_line(name: str, backend: dict[str, Any], reference: str | None) -> str:
    proxy = f" [proxy for {backend['proxy_for']}]" if backend.get("proxy_for") else ""
    status = backend.get("status")
    if status == "unavailable":
        return f"{name}{proxy}: not available: {backend.get('reason')}"
    if status == "skipped":
        return f"{name}{proxy}: not run: {backend.get('reason')}"
    summary = backend.get("summary")
    error = backend.get("error") or {}
    if summary is None and error.get("kind") == "not-on-device":  # script mode: the message is the verdict
        return f"{name}{proxy}: {error.get('message')}"
    if summary is None:
        where = f" ({error['location']})" if error.get("location") else ""
        return f"{name}{proxy}: does not run: {status}: {error.get('message', 'no result')}{where}"
    parts = [f"runs; sustained {fmt.step_time_with_ci(summary['step_time_s'])} per step"]
    parts.append(fmt.rate(summary.get("samples_per_s"), "samples"))
    if summary.get("tokens_per_s"):
        parts.append(fmt.rate(summary["tokens_per_s"], "tokens"))
    if name == reference:
        parts.append("reference")
    elif backend.get("comparison"):
        from torchport.script.report import heavy_load

        loaded = [text for run in backend.get("runs", []) if run.get("status") == "ok" for text in [heavy_load(run)] if text]
        parts.append(f"vs {reference}: {fmt.speedup(backend['comparison'])}"
                     + (f" (MEASURED UNDER HEAVY LOAD: {max(loaded)})" if loaded else ""))
    parts.append(f"first step {fmt.seconds(summary['first_step_s'])}")
    if summary.get("peak_device_memory_bytes") is not None:
        parts.append(f"peak device memory {fmt.size(summary['peak_device_memory_bytes'])}")
    else:
        parts.append(f"peak host RSS {fmt.size(summary.get('peak_host_rss_bytes'))}")
    if summary.get("input_bound"):
        parts.append(f"INPUT-BOUND ({summary['data_wait_share']:.0%} waiting for data)")
    if summary.get("sustained_compilations"):
        parts.append(f"RECOMPILING ({summary['sustained_compilations']} in sustained steps)")
    elif summary.get("warmup_recompiling"):
        parts.append(f"RECOMPILING in warm-up ({summary['warmup_recompiling']['compilations']} compilations)")
    if backend.get("cost"):
        parts.append(f"{fmt.usd(backend['cost']['usd_per_million_samples'])} per 1M samples")
    if error:
        parts.append(f"a later run failed: {error.get('message')}")
    return f"{name}{proxy}: " + "; ".join(parts)
