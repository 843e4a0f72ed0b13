"""The share of an audit's population a person would reject, with a confidence interval, from the decisions made
so far on its sample. Pure numpy (no Django, no scipy).

Every estimator takes the decided items only, aligned:

- `labels`: 1 where the person rejected the item (or, per criterion, rated it failed), 0 where they accepted;
- `inclusion`: each decided item's inclusion probability in the planned sample (`Draw.inclusion`, as stored);
- `planned`: the planned sample size n (`Draw.sample_size`); `population_size`: N.

and for the prediction-powered one the judge's predictions f_i ∈ [0, 1] of the decided items and their sum over
the whole population, computed once at the freeze (NaN counts as 0 in both: use `np.nansum`).

Validity part-way through. People decide the sample in a uniformly random order (`sampling`), so the k items
decided at any moment are a simple random sample of the n drawn, and their inclusion probabilities are exactly
π̃_i = π_i · k / n (two-phase sampling). The estimators use π̃, so every figure is valid at every k ≥ 1, not only
when all n are decided; with k = 0 they return None.

The point estimates (Hájek ratio estimators)
- human-only: θ̂ = Σ w_i y_i / Σ w_i with w_i = 1/π̃_i. Under `uniform` every w_i is equal and θ̂ is the share of
  decided items rejected.
- prediction-powered (PPI++: Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient prediction-powered inference",
  arXiv:2311.01453; with inclusion weights as in Zrnic & Candès 2024, "Active statistical inference", ICML):
  θ̂_λ = λ · F/N + Σ w_i (y_i − λ f_i) / Σ w_i, with F = Σ_population f_i known exactly. The judge's mean over the
  whole population is corrected by the weighted mean of its error on the decided items. Any fixed λ gives a
  design-unbiased (to first order) estimate; λ = 0 is the human-only one. λ is tuned on the sample to minimise
  the estimated variance below, which is PPI++'s power tuning λ̂ = Cov(y, f) / Var(f) (with the unlabelled term
  of PPI++ gone, because the predictions are known for the whole finite population rather than sampled), written
  with the design's weights.

The variance: Deville's estimator for fixed-size high-entropy unequal-probability designs (Deville 1999, "Variance
estimation for complex statistics and estimators: linearization and residual techniques", Survey Methodology 25;
evaluated by Matei & Tillé 2005, J. Official Statistics 21), on the linearised residuals v_i of the estimate:

    V̂ = 1 / (1 − Σ a_i²) · Σ c_i (v_i/π̃_i − Σ_j a_j v_j/π̃_j)² / N̂²,   c_i = 1 − π̃_i,  a_i = c_i / Σ c_j,  N̂ = Σ w_i

Under `uniform` it is exactly the textbook (1 − k/N) s²/k of simple random sampling without replacement, finite
population correction included; at k = N it is 0 (a census). For the prediction-powered estimate it is multiplied
by (k − 1)/(k − 2) for the λ fitted on the same items, and kept above the variance of residuals of size 1 on one
item in k + 1: a judge that agreed with people on every decided item does not make the interval a point.

The interval: a Wilson score interval on the effective sample size n* = θ̂(1 − θ̂)/V̂ (Kish's design effect; Korn &
Graubard 1998, "Confidence intervals for proportions with small expected number of positive counts estimated from
survey data", Survey Methodology 24; Dean & Pagano 2015, "Evaluating confidence interval methods for binomial
proportions in clustered surveys", J. Survey Statistics and Methodology 3). A Wald interval θ̂ ± z√V̂ undercovers
when rejections are rare and few are decided (it collapses to a point when none is seen); Wilson's does not, and
it always lies in [0, 1]. With no rejection (or no acceptance) decided yet, n* is the weights' effective size
N̂² / Σ (1 − π̃_i) w_i² (= k, finite-population corrected, under `uniform`).
The prediction-powered estimate falls back to λ = 0 (the human-only figures) until at least MIN_EACH rejections
and MIN_EACH acceptances are decided: before that, λ̂ and the residual variance rest on a handful of rejections and
the interval would be too narrow.

`tests/audits/test_coverage_simulation.py` checks coverage and unbiasedness by seeded simulation, for both
strategies and both intervals, part-way and at the end; `bench/audit_efficiency.py` measures the widths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

# Rejections and acceptances each needed among the decided items before the judge's predictions are used.
MIN_EACH = 10


@dataclass(frozen=True)
class Interval:
    """The estimated share of the population a person would reject, and its interval at `confidence`."""

    error_rate: float
    low: float
    high: float
    confidence: float
    method: str


@dataclass(frozen=True)
class _Fit:
    """What an interval and a projection need: the estimate, its variance, and how the variance shrinks with more
    decisions. `variance` is V̂ at k decisions (or, where `unit`, 1/n* of a unit-variance proportion); the variance
    after k' decisions is about (k (variance + finite) / k') − finite."""

    estimate: float
    variance: float
    finite: float
    decided: int
    census: bool
    unit: bool  # no rejection or no acceptance yet: the weights' effective size stands for n*
    lam: float = 0.0


def z_value(confidence: float) -> float:
    """The two-sided normal quantile: 1.959963984540054 at 0.95."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson(rate: float, effective_size: float, z: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion `rate` seen in `effective_size` independent trials, in [0, 1]."""
    if math.isinf(effective_size):
        return rate, rate
    n = effective_size
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(max(rate * (1 - rate), 0.0) / n + z * z / (4 * n * n))
    low = 0.0 if rate <= 0.0 else max(0.0, centre - half)  # exact ends where rounding would leave 1e-16
    high = 1.0 if rate >= 1.0 else min(1.0, centre + half)
    return low, high


def _wilson_size(rate: float, half_width: float, z: float) -> float:
    """The effective sample size at which Wilson's interval for `rate` is `half_width` either side (bisection on
    a decreasing function)."""
    low, high = 1e-9, 1e13
    for _ in range(200):
        middle = math.sqrt(low * high)
        lo, hi = wilson(rate, middle, z)
        if (hi - lo) / 2 > half_width:
            low = middle
        else:
            high = middle
        if high / low < 1 + 1e-9:
            break
    return high


def _inputs(labels, inclusion, planned: int, population_size: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    pi = np.asarray(inclusion, dtype=np.float64).reshape(-1)
    if y.shape != pi.shape:
        raise ValueError("labels and inclusion must have one value per decided item")
    if not ((y == 0) | (y == 1)).all():
        raise ValueError("labels must be 0 (accepted) or 1 (rejected)")
    if not (np.isfinite(pi).all() and (pi > 0).all() and (pi <= 1 + 1e-9).all()):
        raise ValueError("inclusion probabilities must lie in (0, 1]")
    if not 1 <= planned <= population_size:
        raise ValueError("planned must lie between 1 and population_size")
    if y.shape[0] > planned:
        raise ValueError("more items decided than planned")
    return y, np.minimum(pi * (y.shape[0] / planned), 1.0)


def _design(pi_k: np.ndarray):
    """The decided items' weights and Deville's bilinear form: `form(u, v)` estimates the covariance of the
    Horvitz-Thompson totals of u and v (None when it cannot be estimated: fewer than 2 items)."""
    weights = 1.0 / pi_k
    c = 1.0 - pi_k
    total_c = c.sum()
    k = pi_k.shape[0]
    if k < 2:
        return weights, None
    if total_c <= 1e-12:  # every decided item had probability 1: a census of what it stands for
        return weights, lambda u, v: 0.0
    a = c / total_c
    scale = 1.0 / max(1.0 - float((a * a).sum()), 1e-12)

    def form(u: np.ndarray, v: np.ndarray) -> float:
        zu, zv = u * weights, v * weights
        return scale * float((c * (zu - (a * zu).sum()) * (zv - (a * zv).sum())).sum())

    return weights, form


def _fit(y: np.ndarray, pi_k: np.ndarray, f: np.ndarray | None, prediction_mean: float, lam: float | None) -> _Fit:
    """The Hájek (λ = 0) or prediction-powered estimate and its variance. `lam=None` tunes λ. With λ ≠ 0 the
    variance is at least that of residuals of size 1 on one item in k + 1 (one disagreement more than seen), so a
    judge that agreed with people on every decided item still leaves a width."""
    k = y.shape[0]
    weights, form = _design(pi_k)
    total = float(weights.sum())
    census = bool((pi_k >= 1.0 - 1e-12).all())
    y_mean = float((weights * y).sum()) / total
    residual_y = y - y_mean
    if f is None or lam == 0.0:
        lam_used, residual, estimate = 0.0, residual_y, y_mean
    else:
        f_mean = float((weights * f).sum()) / total
        residual_f = f - f_mean
        if lam is None:
            spread = form(residual_f, residual_f) if form else 0.0
            lam = form(residual_y, residual_f) / spread if form and spread > 1e-15 else 0.0
        lam_used = float(lam)
        residual = residual_y - lam_used * residual_f
        estimate = lam_used * prediction_mean + y_mean - lam_used * f_mean
    finite = float((weights * residual * residual).sum()) / (total * total)
    rejected = int(y.sum())
    unit = form is None or rejected in (0, k)
    if unit:
        effective = math.inf if census else total * total / float(((1.0 - pi_k) * weights * weights).sum())
        variance = 0.0 if census else 1.0 / effective
        return _Fit(estimate, variance, 0.0 if census else 1.0 / total, k, census, True, lam_used)
    variance = max(form(residual, residual), 0.0) / (total * total)
    if lam_used != 0.0 and k > 2:
        variance *= (k - 1) / (k - 2)
    if lam_used != 0.0 and not census:
        unseen = 1.0 / (k + 1)
        variance = max(variance, unseen * (1 - unseen) * float(((1.0 - pi_k) * weights * weights).sum()) / total**2)
    return _Fit(estimate, variance, finite, k, census, False, lam_used)


def _effective_size(fit: _Fit) -> float:
    if fit.census:
        return math.inf
    if fit.unit:
        return 1.0 / fit.variance
    p = min(max(fit.estimate, 0.0), 1.0)
    return p * (1 - p) / fit.variance if fit.variance > 0 else math.inf


def _interval(fit: _Fit, confidence: float, method: str) -> Interval:
    rate = min(max(fit.estimate, 0.0), 1.0)
    low, high = wilson(rate, _effective_size(fit), z_value(confidence))
    return Interval(error_rate=rate, low=low, high=high, confidence=confidence, method=method)


def _design_name(inclusion: np.ndarray) -> str:
    equal = inclusion.shape[0] == 0 or float(np.ptp(inclusion)) <= 1e-12 * float(inclusion.max())
    return "simple random sample" if equal else "inclusion-weighted (Hájek)"


def human_only(*, labels, inclusion, planned: int, population_size: int, confidence: float = 0.95) -> Interval | None:
    """The share of the population a person would reject, from people's decisions alone: design-based, weighted by
    the inclusion probabilities (equal under `uniform`), valid for the finite population at any number of
    decisions. None before the first decision."""
    y, pi_k = _inputs(labels, inclusion, planned, population_size)
    if y.shape[0] == 0:
        return None
    fit = _fit(y, pi_k, None, 0.0, 0.0)
    name = _design_name(np.asarray(inclusion, dtype=np.float64))
    return _interval(fit, confidence, f"human-only: {name}, Wilson interval on the effective sample size")


def _predictions(predictions_sampled, size: int, prediction_population_sum: float, population_size: int):
    f = np.nan_to_num(np.asarray(predictions_sampled, dtype=np.float64).reshape(-1), nan=0.0)
    if f.shape[0] != size:
        raise ValueError("predictions_sampled must have one value per decided item")
    if not (np.isfinite(f).all() and math.isfinite(prediction_population_sum)):
        raise ValueError("predictions must be finite")
    return f, float(prediction_population_sum) / population_size


def _powered_fit(y, pi_k, f, prediction_mean) -> tuple[_Fit, str]:
    rejected = int(y.sum())
    if min(rejected, y.shape[0] - rejected) < MIN_EACH:
        return _fit(y, pi_k, None, 0.0, 0.0), f"λ = 0 until {MIN_EACH} rejections and {MIN_EACH} acceptances"
    fit = _fit(y, pi_k, f, prediction_mean, None)
    if not 0.0 < fit.estimate < 1.0 or (fit.variance <= 0 and not fit.census):
        return _fit(y, pi_k, None, 0.0, 0.0), "λ = 0 (the judge's correction left [0, 1])"
    return fit, f"λ = {fit.lam:.2f}"


def prediction_powered(
    *,
    labels,
    inclusion,
    planned: int,
    population_size: int,
    predictions_sampled,
    prediction_population_sum: float,
    confidence: float = 0.95,
) -> Interval | None:
    """The share of the population a person would reject, from the judge's predictions over the whole population
    corrected by people's decisions (PPI++ with inclusion weights; λ power-tuned on the sample). λ = 0 gives
    exactly `human_only`; the tuned λ minimises the estimated variance, so the interval is not wider than the
    human-only one beyond the cost of fitting λ. None before the first decision."""
    y, pi_k = _inputs(labels, inclusion, planned, population_size)
    if y.shape[0] == 0:
        return None
    f, prediction_mean = _predictions(predictions_sampled, y.shape[0], prediction_population_sum, population_size)
    fit, how = _powered_fit(y, pi_k, f, prediction_mean)
    name = _design_name(np.asarray(inclusion, dtype=np.float64))
    return _interval(fit, confidence, f"prediction-powered (PPI++, {how}): {name}, Wilson interval")


def decisions_needed(
    *,
    labels,
    inclusion,
    planned: int,
    population_size: int,
    predictions_sampled=None,
    prediction_population_sum: float | None = None,
    half_width: float = 0.02,
    confidence: float = 0.95,
) -> int | None:
    """How many more decisions (in the same order, at the same inclusion probabilities) would bring the interval's
    half-width, (high − low) / 2, to `half_width`, if the share rejected stays where it is: the prediction-powered
    interval's when predictions are given, else the human-only one's. 0 when it is already there; at most the
    undecided rest of the population (a census has width 0). None before the first decision. It may exceed the
    undecided rest of the planned sample: the audit then needs a larger sample."""
    if half_width <= 0:
        raise ValueError("half_width must be positive")
    y, pi_k = _inputs(labels, inclusion, planned, population_size)
    k = y.shape[0]
    if k == 0:
        return None
    if predictions_sampled is None:
        fit = _fit(y, pi_k, None, 0.0, 0.0)
    else:
        if prediction_population_sum is None:
            raise ValueError("prediction_population_sum is needed with predictions_sampled")
        f, prediction_mean = _predictions(predictions_sampled, k, prediction_population_sum, population_size)
        fit, _ = _powered_fit(y, pi_k, f, prediction_mean)
    z = z_value(confidence)
    rate = min(max(fit.estimate, 0.0), 1.0)
    low, high = wilson(rate, _effective_size(fit), z)
    if (high - low) / 2 <= half_width:
        return 0
    size = _wilson_size(rate, half_width, z)
    scale = 1.0 if fit.unit else rate * (1 - rate)
    # V(k') ≈ A / k' − finite with A = k (V(k) + finite): simple random sampling's S²/k' − S²/N, in general.
    target = scale / size + fit.finite
    needed = k * (fit.variance + fit.finite) / target if target > 0 else math.inf
    more = math.ceil(needed - k - 1e-9)
    return int(min(max(more, 0), population_size - k))


def judge_only(*, prediction_population_sum: float, population_size: int) -> float:
    """The judge's own figure: the mean of its predictions over the population (no interval: it is not an estimate
    of what people decide)."""
    if population_size < 1:
        raise ValueError("population_size must be at least 1")
    return float(prediction_population_sum) / population_size
