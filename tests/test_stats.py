"""Statistics: intervals from raw samples, and comparisons that need both
significance and a practical difference."""
import math
import random

import pytest

from torchport.stats import PRACTICAL_THRESHOLD, Measurement, compare, compare_paired, paired_speedups


def noisy_runs(center, runs=3, samples=10, noise=0.02, seed=0):
    rng = random.Random(seed)
    return [[center * (1 + rng.gauss(0, noise)) for _ in range(samples)] for _ in range(runs)]


def test_median_and_interval_contain_the_truth():
    measurement = Measurement(noisy_runs(1.0))
    low, high = measurement.ci95
    assert low <= measurement.median <= high
    assert low < 1.0 < high
    assert high - low < 0.05
    assert measurement.warnings == []


def test_raw_samples_are_kept():
    runs = [[1.0, 2.0], [3.0]]
    measurement = Measurement(runs)
    assert measurement.runs == runs and measurement.samples == [1.0, 2.0, 3.0]
    assert measurement.median == 2.0


def test_one_run_and_noisy_runs_are_flagged():
    assert any("one run only" in w for w in Measurement([[1.0, 1.01, 0.99]]).warnings)
    disagreeing = Measurement([[1.0] * 5, [1.5] * 5, [1.0] * 5])
    assert any("runs disagree by 50%" in w for w in disagreeing.warnings)


def test_between_run_variation_widens_the_interval():
    tight = Measurement([[1.0, 1.001] * 5] * 3)
    spread = Measurement([[0.9, 0.901] * 5, [1.0, 1.001] * 5, [1.1, 1.101] * 5])
    assert (spread.ci95[1] - spread.ci95[0]) > 10 * (tight.ci95[1] - tight.ci95[0])


def test_clear_speedup_is_significant_and_practical():
    fast, slow = Measurement(noisy_runs(1.0, seed=1)), Measurement(noisy_runs(2.0, seed=2))
    result = compare(fast, slow)
    assert 1.9 < result.speedup < 2.1
    assert result.significant and result.practical and result.verdict == "faster"
    assert compare(slow, fast).verdict == "slower"


def test_small_difference_is_not_practical():
    a, b = Measurement(noisy_runs(1.0, noise=0.001, seed=3)), Measurement(noisy_runs(1.02, noise=0.001, seed=4))
    result = compare(a, b)
    assert result.significant and not result.practical
    assert "not a practical difference" in result.verdict
    assert PRACTICAL_THRESHOLD == 0.05


def test_overlapping_noise_is_no_clear_difference():
    a, b = Measurement(noisy_runs(1.0, noise=0.2, seed=5)), Measurement(noisy_runs(1.0, noise=0.2, seed=6))
    assert compare(a, b).verdict == "no clear difference"


def test_paired_comparison_cancels_drift_between_pairs():
    # Each pair ran on a machine of a different speed (x0.7 .. x1.4); within a
    # pair the candidate is 10% slower.  Unpaired, the drift hides it; paired, it shows.
    rng = random.Random(3)
    speeds = [0.7, 1.0, 1.4, 0.85, 1.2]
    reference = [[s * (1 + rng.gauss(0, 0.02)) for _ in range(20)] for s in speeds]
    candidate = [[s * 1.1 * (1 + rng.gauss(0, 0.02)) for _ in range(20)] for s in speeds]
    paired = compare_paired(Measurement(candidate), Measurement(reference))
    assert abs(1 / paired.speedup - 1.1) < 0.02
    assert paired.ci95[1] < 1 and paired.significant and paired.verdict == "slower"
    unpaired = compare(Measurement(candidate), Measurement(reference))
    assert not unpaired.significant


def test_paired_comparison_cancels_drift_between_blocks():
    # The machine's speed jumps from block to block (x0.6 .. x1.6), the same for
    # the two adjacent blocks of a pair; the candidate is 3% slower.  Each run's
    # ratio of medians carries the jumps; the pairs' block ratios do not.
    rng = random.Random(4)
    reference, candidate = [], []
    for _ in range(5):
        speeds = [rng.uniform(0.6, 1.6) for _ in range(20)]
        reference.append([s * (1 + rng.gauss(0, 0.01)) for s in speeds])
        candidate.append([s * 1.03 * (1 + rng.gauss(0, 0.01)) for s in speeds])
    paired = compare_paired(Measurement(candidate), Measurement(reference))
    low, high = 1 / paired.ci95[1], 1 / paired.ci95[0]
    assert 1.02 < low < 1.03 < high < 1.04
    assert all(abs(1 / s - 1.03) < 0.01 for s in paired_speedups(Measurement(candidate), Measurement(reference)))


def test_paired_interval_covers_the_true_ratio_95_times_in_100():
    # Each pair of processes has its own offset (heap layout, threads: sd 2%)
    # on top of block noise (sd 5%), as real rounds do: an interval that took
    # the blocks of a round as independent would miss far more often than 5%.
    rng = random.Random(5)
    trials, covered = 400, 0
    for _ in range(trials):
        reference, candidate = [], []
        for _ in range(5):
            offset = rng.gauss(0, 0.02)
            reference.append([math.exp(rng.gauss(0, 0.05)) for _ in range(20)])
            candidate.append([math.exp(1.0 + offset + rng.gauss(0, 0.05)) for _ in range(20)])
        low, high = compare_paired(Measurement(candidate), Measurement(reference)).ci95
        covered += low <= math.exp(-1.0) <= high
    assert 0.92 <= covered / trials <= 0.98


def test_one_pair_of_runs_is_within_run_only():
    rng = random.Random(6)
    reference = [[1 + rng.gauss(0, 0.02) for _ in range(20)]]
    candidate = [[1.1 * value * (1 + rng.gauss(0, 0.02)) for value in reference[0]]]
    paired = compare_paired(Measurement(candidate), Measurement(reference))
    assert paired.within_run_only and not paired.significant
    assert paired.ci95[0] < 1 / 1.1 < paired.ci95[1]


def test_paired_comparison_needs_matching_pairs():
    with pytest.raises(ValueError, match="same number"):
        compare_paired(Measurement([[1.0], [1.0]]), Measurement([[1.0]]))


def test_losses_are_compared_at_a_step_every_run_reached():
    """Adaptive warm-up stops backends at different steps: their final losses
    are not comparable, their losses at the last common step are."""
    from torchport.records import RunRecord
    from torchport.summary import loss_at_common_step, training

    def run(first, warmup, sustained):
        return RunRecord.from_dict({"status": "ok", "training": {
            "first_step": {"losses": first},
            "warmup": {"blocks": [{"losses": block} for block in warmup]},
            "sustained": {"blocks": [{"losses": block} for block in sustained]}}})

    long = run([2.0], [[1.9, 1.8], [1.7, 1.6]], [[1.5, 1.4], [1.3, 1.2]])  # 9 steps
    short = run([2.0], [[1.95]], [[1.85, 1.75], [1.65, 1.55]])  # 6 steps
    assert training(long).losses() == [2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.2]
    common = loss_at_common_step([long], [short])
    assert common is not None and common.step == 6
    assert (common.loss, common.reference_loss) == (1.5, 1.55)
    assert common.relative_difference is not None and abs(common.relative_difference - 0.05 / 1.55) < 1e-12


def test_one_process_per_side_is_never_significant():
    # A 2x difference, but each side is a single process: the interval shows within-run noise only.
    fast, slow = Measurement(noisy_runs(1.0, runs=1, seed=7)), Measurement(noisy_runs(2.0, runs=1, seed=8))
    result = compare(fast, slow)
    assert result.runs == 1 and not result.significant
    assert result.verdict == "one process per side: within-run noise only, not a verdict"
    # One side with several processes does not make up for the other's single one.
    assert not compare(Measurement(noisy_runs(1.0, runs=3, seed=9)), slow).significant


def test_a_very_wide_interval_is_inconclusive_with_the_runs_to_narrow_it():
    wild = Measurement([[0.1] * 5, [1.0] * 5, [3.0] * 5])
    result = compare(wild, Measurement(noisy_runs(1.0, seed=10)))
    assert result.inconclusive and result.width > 2
    assert result.verdict.startswith("inconclusive (the interval spans")
    assert result.runs_to_decide is not None and result.runs_to_decide > 3
    assert f"about {result.runs_to_decide} runs per side" in result.verdict


def test_faster_only_when_the_whole_interval_clears_the_threshold():
    # About 4% faster with a tight interval: significant, but not by the practical 5%.
    a = Measurement(noisy_runs(1.0, noise=0.02, seed=11))
    b = Measurement(noisy_runs(1.06, noise=0.02, seed=12))
    result = compare(a, b)
    low, high = result.ci95
    assert result.significant and low < 1 + PRACTICAL_THRESHOLD < high
    assert result.verdict == "faster, but not clearly by 5% or more"
