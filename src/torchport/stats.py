"""Statistics over timing samples: medians, intervals, comparisons.

Samples arrive grouped by run (one fresh process each).  Run-to-run variation
is usually larger than the variation inside one run, so intervals come from a
hierarchical bootstrap: resample runs, then blocks within each chosen run.
With one run the interval can only show within-run noise, and says so.
Runs made in pairs that took turns block by block (``compare_paired``) are
compared pair by pair instead, with Student's t over the pairs.

A difference between two backends is called only when it is both
statistically clear (the 95% interval of the ratio excludes 1, from at least
two processes per side) and practically relevant (the whole interval beyond
``PRACTICAL_THRESHOLD``), as asv does.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from functools import cached_property
from collections.abc import Iterable, Sequence

BOOTSTRAP_RESAMPLES = 2000
PRACTICAL_THRESHOLD = 0.05  # differences under 5% are not worth a migration decision
SPREAD_WARNING = 0.10  # relative spread of run medians above which figures are flagged noisy
CONFIDENCE = 0.95
# With one process per side, run-to-run variation (usually the larger part) is unseen.
MIN_RUNS_FOR_VERDICT = 2
# An interval whose high end is over twice its low end says nothing useful about speed.
INCONCLUSIVE_WIDTH = 2.0


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (sound at small counts and near 0 or 1, unlike
    the normal approximation)."""
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)  # rounding leaves -1e-17 at 0 of n


def median(values: Iterable[float]) -> float:
    """The one median torchport computes (of an even count, the mean of the two
    middle values): every figure called a median goes through here."""
    return statistics.median(values)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        raise ValueError("no values")
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


class Measurement:
    """Raw samples of one quantity (e.g. seconds per step), grouped by run.
    Keeps the samples; every statistic is computed on first use."""

    def __init__(self, runs: Sequence[Sequence[float]], seed: int = 0):
        self.runs = [list(run) for run in runs if len(run)]
        if not self.runs:
            raise ValueError("a measurement needs at least one sample")
        self._seed = seed

    @property
    def samples(self) -> list[float]:
        return [value for run in self.runs for value in run]

    @cached_property
    def median(self) -> float:
        return median(self.samples)

    @cached_property
    def run_medians(self) -> list[float]:
        return [median(run) for run in self.runs]

    @cached_property
    def _bootstrap_medians(self) -> list[float]:
        rng = random.Random(self._seed)
        estimates = []
        for _ in range(BOOTSTRAP_RESAMPLES):
            chosen = [self.runs[rng.randrange(len(self.runs))] for _ in self.runs]
            pooled = [run[rng.randrange(len(run))] for run in chosen for _ in run]
            estimates.append(median(pooled))
        estimates.sort()
        return estimates

    @cached_property
    def ci95(self) -> tuple[float, float]:
        tail = (1 - CONFIDENCE) / 2
        return (_quantile(self._bootstrap_medians, tail), _quantile(self._bootstrap_medians, 1 - tail))

    @cached_property
    def run_spread(self) -> float:
        """(max - min) / median of the run medians: how much fresh processes disagree."""
        medians = self.run_medians
        return (max(medians) - min(medians)) / self.median if self.median else 0.0

    @cached_property
    def within_run_spread(self) -> float:
        """Median over runs of each run's interquartile range relative to its median."""
        spreads = []
        for run in self.runs:
            ordered = sorted(run)
            mid = median(ordered)
            if mid:
                spreads.append((_quantile(ordered, 0.75) - _quantile(ordered, 0.25)) / mid)
        return median(spreads) if spreads else 0.0

    @property
    def warnings(self) -> list[str]:
        notes = []
        if len(self.runs) == 1:
            notes.append("one run only: the interval shows within-run noise, not run-to-run variation")
        if len(self.runs) > 1 and self.run_spread > SPREAD_WARNING:
            notes.append(f"runs disagree by {self.run_spread:.0%} (over {SPREAD_WARNING:.0%}): the machine is noisy")
        if self.within_run_spread > SPREAD_WARNING:
            notes.append(f"within-run spread (IQR) is {self.within_run_spread:.0%} of the median")
        return notes

    def summary(self) -> dict:
        low, high = self.ci95
        return {
            "median": self.median,
            "ci95": [low, high],
            "runs": len(self.runs),
            "samples": len(self.samples),
            "run_medians": self.run_medians,
            "run_spread": self.run_spread,
            "within_run_spread": self.within_run_spread,
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class Comparison:
    """How a candidate compares with a reference, for a lower-is-better time.

    The words follow what the data allows: "faster"/"slower" only when the
    whole interval lies beyond the practical threshold; "inconclusive" when the
    interval is too wide to decide anything (with the runs it would take to
    narrow it); and with one process on either side nothing is called
    significant, because such an interval covers noise within one run only."""

    speedup: float  # reference time / candidate time; > 1 means the candidate is faster
    ci95: tuple[float, float]
    significant: bool  # the interval excludes 1, from at least MIN_RUNS_FOR_VERDICT processes per side
    practical: bool
    runs: int = MIN_RUNS_FOR_VERDICT  # fresh processes on the side that has fewer

    @property
    def within_run_only(self) -> bool:
        return self.runs < MIN_RUNS_FOR_VERDICT

    @property
    def width(self) -> float:
        """high / low of the interval: 1.1 is an interval 10% wide."""
        low, high = self.ci95
        return high / low if low > 0 else math.inf

    @property
    def inconclusive(self) -> bool:
        """Too wide to decide: over INCONCLUSIVE_WIDTH and not wholly beyond the threshold either way."""
        low, high = self.ci95
        decided = low > 1 + PRACTICAL_THRESHOLD or high < 1 / (1 + PRACTICAL_THRESHOLD)
        return self.width > INCONCLUSIVE_WIDTH and not decided

    @property
    def runs_to_decide(self) -> int | None:
        """About how many processes per side would narrow the interval to
        +-PRACTICAL_THRESHOLD, if its width shrinks as 1/sqrt(runs)."""
        if math.isinf(self.width) or self.width <= 1:
            return None
        target = math.log((1 + PRACTICAL_THRESHOLD) ** 2)
        current = math.log(self.width)
        if current <= target:
            return None
        return max(MIN_RUNS_FOR_VERDICT, math.ceil(max(self.runs, 1) * (current / target) ** 2))

    @property
    def verdict(self) -> str:
        low, high = self.ci95
        threshold = f"{PRACTICAL_THRESHOLD:.0%}"
        if self.within_run_only:
            return "one process per side: within-run noise only, not a verdict"
        if low > 1 + PRACTICAL_THRESHOLD:
            return "faster"
        if high < 1 / (1 + PRACTICAL_THRESHOLD):
            return "slower"
        if self.inconclusive:
            more = f"; about {self.runs_to_decide} runs per side would narrow it to ±{threshold}" if self.runs_to_decide else ""
            return f"inconclusive (the interval spans {self.width:.1f}x{more})"
        if low >= 1 / (1 + PRACTICAL_THRESHOLD) and high <= 1 + PRACTICAL_THRESHOLD:
            return f"within {threshold} (not a practical difference)"
        if self.significant:
            return f"{'faster' if self.speedup > 1 else 'slower'}, but not clearly by {threshold} or more"
        return "no clear difference"

    def as_dict(self) -> dict:
        return {
            "speedup": self.speedup,
            "ci95": list(self.ci95),
            "significant": self.significant,
            "practical": self.practical,
            "verdict": self.verdict,
            "practical_threshold": PRACTICAL_THRESHOLD,
            "runs": self.runs,
            "inconclusive": self.inconclusive,
            "runs_to_decide": self.runs_to_decide,
        }


def compare(candidate: Measurement, reference: Measurement) -> Comparison:
    speedup = reference.median / candidate.median
    ratios = [r / c for r, c in zip(reference._bootstrap_medians, _shuffled(candidate._bootstrap_medians))]
    return _comparison(speedup, ratios, min(len(candidate.runs), len(reference.runs)))


def paired_speedups(candidate: Measurement, reference: Measurement) -> list[float]:
    """For runs made in pairs (run i of each side at the same time, block k of
    one right before or after block k of the other: ``torchport.turns``), one
    figure per pair of runs: the median over its block pairs of reference /
    candidate.  Two adjacent blocks saw the same machine, so the machine's
    drift cancels block by block, not only run by run; the median keeps one
    block that another process interrupted from moving the figure."""
    pairs = list(zip(candidate.runs, reference.runs))
    if len(candidate.runs) != len(reference.runs) or any(len(c) != len(r) for c, r in pairs):
        raise ValueError("paired comparison needs the same number of runs and of blocks on both sides")
    if any(value <= 0 for run in candidate.runs + reference.runs for value in run):
        raise ValueError("paired comparison needs positive times")
    return [math.exp(median([math.log(r / c) for c, r in zip(cand, ref)])) for cand, ref in pairs]


def compare_paired(candidate: Measurement, reference: Measurement, seed: int = 0) -> Comparison:
    """Like ``compare``, for runs made in pairs (``paired_speedups``).  The
    estimate is the geometric mean over pairs of runs of each pair's median
    block ratio; its 95% interval is Student's t over the pairs' log figures
    (n - 1 degrees of freedom).  The pairs of runs are the independent units:
    blocks inside one run share its process (its heap layout, its threads) and
    are not independent, so they enter only through their pair's median.  With
    one pair of runs there is no spread between pairs to use: the interval
    then resamples that pair's block pairs and covers within-run noise only
    (``Comparison.within_run_only`` says so)."""
    per_pair = [math.log(speedup) for speedup in paired_speedups(candidate, reference)]
    estimate = statistics.fmean(per_pair)
    if len(per_pair) > 1:
        half_width = _t975(len(per_pair) - 1) * statistics.stdev(per_pair) / math.sqrt(len(per_pair))
        low, high = math.exp(estimate - half_width), math.exp(estimate + half_width)
        return _comparison_from_interval(math.exp(estimate), (low, high), len(per_pair))
    rng = random.Random(seed)
    cand, ref = candidate.runs[0], reference.runs[0]
    estimates = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        picks = [rng.randrange(len(cand)) for _ in cand]
        estimates.append(paired_speedups(Measurement([[cand[i] for i in picks]]),
                                         Measurement([[ref[i] for i in picks]]))[0])
    return _comparison(math.exp(estimate), estimates, 1)


# Student's t, 97.5th percentile, by degrees of freedom; between two entries the
# smaller one's (the wider interval) is taken.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def _t975(degrees_of_freedom: int) -> float:
    return _T975[max(df for df in _T975 if df <= degrees_of_freedom)]


def _comparison(speedup: float, bootstrap_speedups: list[float], runs: int) -> Comparison:
    """The comparison from a speedup and its bootstrap distribution (percentile interval)."""
    ordered = sorted(bootstrap_speedups)
    tail = (1 - CONFIDENCE) / 2
    return _comparison_from_interval(speedup, (_quantile(ordered, tail), _quantile(ordered, 1 - tail)), runs)


def _comparison_from_interval(speedup: float, interval: tuple[float, float], runs: int) -> Comparison:
    """The verdict: significant when the 95% interval excludes 1 and each side
    had several processes, practical beyond the threshold."""
    low, high = interval
    significant = (low > 1 or high < 1) and runs >= MIN_RUNS_FOR_VERDICT
    return Comparison(speedup, (low, high), significant, abs(speedup - 1) >= PRACTICAL_THRESHOLD, runs)


def _shuffled(values: list[float]) -> list[float]:
    # Pair the two bootstrap distributions independently, not in sorted order.
    copy = list(values)
    random.Random(1).shuffle(copy)
    return copy
