"""The estimators on fixed data, against independent computations written out here as plain loops over the
textbook formulas (simple random sampling with a finite-population correction, the regression estimator, the
Hájek estimator with Deville's variance, Wilson's interval), and at the edges: no decision, all accepted, all
rejected, the whole population decided."""

import math

import numpy as np
import pytest

from simia_web.audits import estimation
from simia_web.audits.estimation import Interval, decisions_needed, human_only, judge_only, prediction_powered

Z95 = 1.959963984540054


def wilson_by_hand(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson (1927): the p0 with (p − p0)² = z² p0 (1 − p0) / n, solved as a quadratic in p0."""
    a = 1 + z * z / n
    b = -(2 * p + z * z / n)
    c = p * p
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


def mean(values) -> float:
    return sum(values) / len(values)


# A fixed sample: 48 decided of 80 planned from N = 2,000 (uniform), 11 rejected.
LABELS = [int(c) for c in "100010000010010100000010001000010000100001010000"]
N, PLANNED = 2000, 80


def test_uniform_human_only_is_the_srs_share_with_wilson_on_the_fpc_sample_size():
    k = len(LABELS)
    p = sum(LABELS) / k
    s2 = sum((y - p) ** 2 for y in LABELS) / (k - 1)
    variance = (1 - k / N) * s2 / k  # Cochran (1977) 3.4, without replacement
    low, high = wilson_by_hand(p, p * (1 - p) / variance)
    got = human_only(labels=LABELS, inclusion=[PLANNED / N] * k, planned=PLANNED, population_size=N)
    assert got.error_rate == pytest.approx(11 / 48)
    assert got.low == pytest.approx(low, rel=1e-10)
    assert got.high == pytest.approx(high, rel=1e-10)
    assert got.confidence == 0.95
    assert "simple random sample" in got.method
    # The effective size: k/(1 − k/N), the finite-population corrected size, with s²'s k − 1 for k.
    assert p * (1 - p) / variance == pytest.approx((k - 1) * N / (N - k))


def test_uniform_prediction_powered_is_the_regression_estimator():
    rng = np.random.default_rng(8)
    k = len(LABELS)
    predictions = [round(0.55 * y + 0.3 * rng.random(), 3) for y in LABELS]
    population_sum = 497.3  # Σ f over the N members, known at the freeze
    y_bar, f_bar = mean(LABELS), mean(predictions)
    sxy = sum((y - y_bar) * (f - f_bar) for y, f in zip(LABELS, predictions, strict=True))
    sxx = sum((f - f_bar) ** 2 for f in predictions)
    lam = sxy / sxx  # PPI++'s λ with the predictions' population mean known exactly
    estimate = lam * population_sum / N + y_bar - lam * f_bar
    residuals = [(y - y_bar) - lam * (f - f_bar) for y, f in zip(LABELS, predictions, strict=True)]
    variance = (1 - k / N) * sum(e * e for e in residuals) / (k - 2) / k  # Cochran (1977) 7.29
    low, high = wilson_by_hand(estimate, estimate * (1 - estimate) / variance)
    got = prediction_powered(
        labels=LABELS,
        inclusion=[PLANNED / N] * k,
        planned=PLANNED,
        population_size=N,
        predictions_sampled=predictions,
        prediction_population_sum=population_sum,
    )
    assert got.error_rate == pytest.approx(estimate, rel=1e-10)
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-10)
    assert f"λ = {lam:.2f}" in got.method
    human = human_only(labels=LABELS, inclusion=[PLANNED / N] * k, planned=PLANNED, population_size=N)
    assert got.high - got.low < human.high - human.low


# A fixed active sample: 30 decided of 60 planned from N = 5,000, with unequal inclusion probabilities.
ACTIVE_LABELS = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]
ACTIVE_INCLUSION = [0.05, 0.006, 0.008, 0.04, 0.01, 0.006, 0.02, 0.03, 0.006, 0.007] * 3
ACTIVE_N, ACTIVE_PLANNED = 5000, 60


def hajek_by_hand(labels, inclusion, planned):
    """The Hájek estimate and Deville's (1999) variance of it, as loops: π̃ = π k/n, w = 1/π̃, residuals
    (y − θ̂) linearise the ratio, and Deville's estimator for a fixed-size high-entropy design."""
    k = len(labels)
    pik = [p * k / planned for p in inclusion]
    w = [1 / p for p in pik]
    total = sum(w)
    theta = sum(wi * yi for wi, yi in zip(w, labels, strict=True)) / total
    return theta, pik, w, total


def deville_by_hand(values, pik, total):
    c = [1 - p for p in pik]
    a = [ci / sum(c) for ci in c]
    z = [v / p for v, p in zip(values, pik, strict=True)]
    centre = sum(ai * zi for ai, zi in zip(a, z, strict=True))
    return sum(ci * (zi - centre) ** 2 for ci, zi in zip(c, z, strict=True)) / (1 - sum(ai * ai for ai in a)) / total**2


def test_active_human_only_is_hajek_with_devilles_variance():
    theta, pik, _, total = hajek_by_hand(ACTIVE_LABELS, ACTIVE_INCLUSION, ACTIVE_PLANNED)
    variance = deville_by_hand([y - theta for y in ACTIVE_LABELS], pik, total)
    low, high = wilson_by_hand(theta, theta * (1 - theta) / variance)
    got = human_only(labels=ACTIVE_LABELS, inclusion=ACTIVE_INCLUSION, planned=ACTIVE_PLANNED, population_size=ACTIVE_N)
    assert got.error_rate == pytest.approx(theta, rel=1e-10)
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-10)
    assert "Hájek" in got.method
    # Weighting matters here: the unweighted share is far above the weighted one.
    assert mean(ACTIVE_LABELS) > theta + 0.05


def test_active_prediction_powered_with_the_weights():
    predictions = [0.6, 0.1, 0.05, 0.5, 0.2, 0.1, 0.3, 0.4, 0.05, 0.1] * 3
    population_sum = 0.02 * ACTIVE_N
    theta_y, pik, w, total = hajek_by_hand(ACTIVE_LABELS, ACTIVE_INCLUSION, ACTIVE_PLANNED)
    f_w = sum(wi * fi for wi, fi in zip(w, predictions, strict=True)) / total
    ry = [y - theta_y for y in ACTIVE_LABELS]
    rf = [f - f_w for f in predictions]
    # λ minimises Deville's variance of the residual (ry − λ rf): the ratio of its cross and square terms.
    cross = (deville_by_hand([a + b for a, b in zip(ry, rf, strict=True)], pik, total)
             - deville_by_hand(ry, pik, total) - deville_by_hand(rf, pik, total)) / 2  # fmt: skip
    lam = cross / deville_by_hand(rf, pik, total)
    estimate = lam * population_sum / ACTIVE_N + theta_y - lam * f_w
    k = len(ACTIVE_LABELS)
    variance = deville_by_hand([a - lam * b for a, b in zip(ry, rf, strict=True)], pik, total) * (k - 1) / (k - 2)
    low, high = wilson_by_hand(estimate, estimate * (1 - estimate) / variance)
    # With 8 rejections this sample is below MIN_EACH; lower it to see the formula at work.
    original = estimation.MIN_EACH
    estimation.MIN_EACH = 5
    try:
        got = prediction_powered(
            labels=ACTIVE_LABELS,
            inclusion=ACTIVE_INCLUSION,
            planned=ACTIVE_PLANNED,
            population_size=ACTIVE_N,
            predictions_sampled=predictions,
            prediction_population_sum=population_sum,
        )
    finally:
        estimation.MIN_EACH = original
    assert got.error_rate == pytest.approx(estimate, rel=1e-10)
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-10)


def test_prediction_powered_is_human_only_until_enough_of_each_decision():
    arguments = dict(labels=ACTIVE_LABELS, inclusion=ACTIVE_INCLUSION, planned=ACTIVE_PLANNED, population_size=ACTIVE_N)
    assert sum(ACTIVE_LABELS) < estimation.MIN_EACH
    powered = prediction_powered(**arguments, predictions_sampled=[0.3] * 30, prediction_population_sum=900.0)
    human = human_only(**arguments)
    assert (powered.error_rate, powered.low, powered.high) == (human.error_rate, human.low, human.high)
    assert "λ = 0" in powered.method


def test_a_constant_judge_changes_nothing():
    labels = [1] * 12 + [0] * 60
    arguments = dict(labels=labels, inclusion=[0.05] * 72, planned=100, population_size=2000)
    powered = prediction_powered(**arguments, predictions_sampled=[0.4] * 72, prediction_population_sum=800.0)
    human = human_only(**arguments)
    assert powered.error_rate == pytest.approx(human.error_rate)
    assert (powered.low, powered.high) == pytest.approx((human.low, human.high))


def test_a_perfect_judge_gives_the_truth_but_keeps_a_width():
    """Predictions equal to people's decisions everywhere: λ = 1, the residuals vanish and the estimate is the
    truth; the interval keeps the width of one disagreement more than seen (one item in k + 1)."""
    rng = np.random.default_rng(3)
    population = (rng.random(3000) < 0.07).astype(float)
    sample = rng.choice(3000, size=400, replace=False)
    got = prediction_powered(
        labels=population[sample],
        inclusion=[400 / 3000] * 400,
        planned=400,
        population_size=3000,
        predictions_sampled=population[sample],
        prediction_population_sum=float(population.sum()),
    )
    assert got.error_rate == pytest.approx(population.mean())
    unseen = 1 / 401
    variance = unseen * (1 - unseen) * (1 - 400 / 3000) / 400
    p = population.mean()
    assert (got.low, got.high) == pytest.approx(wilson_by_hand(p, p * (1 - p) / variance), rel=1e-10)
    human = human_only(labels=population[sample], inclusion=[400 / 3000] * 400, planned=400, population_size=3000)
    assert 0 < got.high - got.low < 0.6 * (human.high - human.low)


def test_no_decision_yet():
    empty = dict(labels=[], inclusion=[], planned=10, population_size=100)
    assert human_only(**empty) is None
    assert prediction_powered(**empty, predictions_sampled=[], prediction_population_sum=3.0) is None
    assert decisions_needed(**empty) is None


def test_all_accepted():
    k, n_pop = 150, 10_000
    got = human_only(labels=[0] * k, inclusion=[300 / n_pop] * k, planned=300, population_size=n_pop)
    effective = k * k / ((1 - k / n_pop) * k)  # N̂² / Σ (1 − π̃) w² with equal weights: k / (1 − k/N)
    assert got.error_rate == 0.0 and got.low == 0.0
    assert got.high == pytest.approx(Z95**2 / (effective + Z95**2))  # Wilson's upper bound with none seen
    assert got.high >= 1 - 0.025 ** (1 / k)  # no tighter than the exact (Clopper–Pearson) bound for 0 of k
    powered = prediction_powered(
        labels=[0] * k,
        inclusion=[300 / n_pop] * k,
        planned=300,
        population_size=n_pop,
        predictions_sampled=np.linspace(0, 0.2, k),
        prediction_population_sum=500.0,
    )
    assert (powered.error_rate, powered.low, powered.high) == (got.error_rate, got.low, got.high)


def test_all_rejected():
    got = human_only(labels=[1] * 20, inclusion=[0.01] * 20, planned=40, population_size=4000)
    assert got.error_rate == 1.0 and got.high == 1.0
    assert 0.8 < got.low < 1.0


def test_the_whole_population_decided_is_exact():
    labels = [1, 0, 0, 1, 0, 0, 0, 0, 1, 0]
    got = human_only(labels=labels, inclusion=[1.0] * 10, planned=10, population_size=10)
    assert (got.error_rate, got.low, got.high) == (0.3, 0.3, 0.3)
    powered = prediction_powered(
        labels=labels,
        inclusion=[1.0] * 10,
        planned=10,
        population_size=10,
        predictions_sampled=[0.5] * 10,
        prediction_population_sum=5.0,
    )
    assert (powered.low, powered.high) == (0.3, 0.3)
    assert decisions_needed(labels=labels, inclusion=[1.0] * 10, planned=10, population_size=10) == 0
    # Part-way through a census the items decided stand for the rest: not exact yet.
    partial = human_only(labels=labels[:5], inclusion=[1.0] * 5, planned=10, population_size=10)
    assert partial.low < 0.4 < partial.high and partial.high - partial.low > 0


def test_decisions_needed_is_what_brings_the_width_to_the_target():
    """Project: with the share rejected staying at 10%, the human-only interval reaches ±2 points after k + more
    decisions; recompute it there (and a little before) by hand."""
    n_pop = 200_000
    labels = [1] * 10 + [0] * 90
    more = decisions_needed(labels=labels, inclusion=[0.01] * 100, planned=2000, population_size=n_pop)
    assert 700 < more < 900  # ≈ z² · 0.1 · 0.9 / 0.02² = 864 in all

    def half_width(k: int) -> float:
        p = 0.1
        s2 = p * (1 - p) * k / (k - 1)
        low, high = wilson_by_hand(p, p * (1 - p) / ((1 - k / n_pop) * s2 / k))
        return (high - low) / 2

    assert half_width(100 + more) <= 0.02 * 1.002
    assert half_width(100 + more - 10) > 0.02
    assert decisions_needed(labels=labels, inclusion=[0.01] * 100, planned=2000, population_size=n_pop,
                            half_width=0.01) > 3 * more  # fmt: skip
    assert decisions_needed(labels=labels, inclusion=[0.01] * 100, planned=2000, population_size=n_pop,
                            half_width=0.2) == 0  # fmt: skip


def test_decisions_needed_stops_at_a_census():
    labels = [1] * 30 + [0] * 70
    more = decisions_needed(labels=labels, inclusion=[0.5] * 100, planned=200, population_size=400, half_width=0.001)
    assert more == 300  # everyone left: a census has no width


def test_decisions_needed_with_the_judge():
    rng = np.random.default_rng(4)
    labels = (rng.random(300) < 0.12).astype(int)
    predictions = np.clip(0.6 * labels + 0.25 * rng.random(300), 0, 1)
    arguments = dict(labels=labels, inclusion=[0.003] * 300, planned=600, population_size=100_000)
    human = decisions_needed(**arguments)
    powered = decisions_needed(**arguments, predictions_sampled=predictions, prediction_population_sum=19_700.0)
    assert 0 <= powered < human


def test_judge_only_and_the_interval_type():
    assert judge_only(prediction_population_sum=50.0, population_size=1000) == 0.05
    interval = human_only(labels=[0, 1], inclusion=[0.5, 0.5], planned=2, population_size=4)
    assert isinstance(interval, Interval)
    assert set(interval.__dataclass_fields__) == {"error_rate", "low", "high", "confidence", "method"}
    with pytest.raises(AttributeError):
        interval.low = 0.0  # type: ignore[misc]
    assert estimation.z_value(0.95) == pytest.approx(Z95, rel=1e-12)
    ninety = human_only(labels=[0, 1] * 20, inclusion=[0.1] * 40, planned=40, population_size=400, confidence=0.9)
    assert ninety.confidence == 0.9
    assert ninety.high - ninety.low < interval.high - interval.low


def test_bad_inputs():
    with pytest.raises(ValueError, match="one value per decided item"):
        human_only(labels=[0, 1], inclusion=[0.1], planned=5, population_size=50)
    with pytest.raises(ValueError, match="0 .accepted. or 1"):
        human_only(labels=[0, 2], inclusion=[0.1, 0.1], planned=5, population_size=50)
    with pytest.raises(ValueError, match="inclusion"):
        human_only(labels=[0, 1], inclusion=[0.1, 0.0], planned=5, population_size=50)
    with pytest.raises(ValueError, match="more items decided than planned"):
        human_only(labels=[0, 1, 0], inclusion=[0.1] * 3, planned=2, population_size=50)
    with pytest.raises(ValueError, match="planned"):
        human_only(labels=[0], inclusion=[0.1], planned=60, population_size=50)
    with pytest.raises(ValueError, match="predictions_sampled"):
        prediction_powered(
            labels=[0, 1], inclusion=[0.1] * 2, planned=5, population_size=50, predictions_sampled=[0.1],
            prediction_population_sum=1.0,
        )  # fmt: skip
    with pytest.raises(ValueError, match="confidence"):
        human_only(labels=[0, 1], inclusion=[0.1] * 2, planned=5, population_size=50, confidence=1.0)
    with pytest.raises(ValueError, match="prediction_population_sum"):
        decisions_needed(labels=[0, 1], inclusion=[0.1] * 2, planned=5, population_size=50, predictions_sampled=[0, 1])


def test_missing_predictions_count_as_zero():
    labels = [1] * 15 + [0] * 45
    base = dict(labels=labels, inclusion=[0.02] * 60, planned=100, population_size=5000)
    predictions = [0.7] * 10 + [np.nan] * 5 + [0.1] * 40 + [np.nan] * 5
    with_nan = prediction_powered(**base, predictions_sampled=predictions, prediction_population_sum=600.0)
    zeros = prediction_powered(**base, predictions_sampled=np.nan_to_num(predictions), prediction_population_sum=600.0)
    assert with_nan == zeros
