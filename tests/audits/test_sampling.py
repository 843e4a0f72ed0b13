"""Drawing an audit's sample: reproducible from the seed, every member's inclusion probability known and above 0,
and the probabilities are the ones the draw actually realises (checked by repeated draws, whole and part-way)."""

import time

import numpy as np
import pytest

from simia_web.audits import sampling
from simia_web.audits.sampling import STRATEGIES, draw, inclusion_probabilities, rejection_risk


def _risk(size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rejection_risk(
        judge_score=rng.random(size),
        judge_confidence=rng.random(size),
        judge_failed=(rng.random(size) < 0.2).astype(float),
        criterion_spread=rng.random(size) * 0.4,
        violations=rng.poisson(0.2, size),
        has_duplicates=rng.random(size) < 0.05,
    )


def _band(draws: int, probability: np.ndarray, sigmas: float = 4.5) -> np.ndarray:
    """How far a frequency over `draws` independent draws may stray from `probability` (normal approximation)."""
    return sigmas * np.sqrt(probability * (1 - probability) / draws) + 1.0 / draws


def test_strategies():
    assert STRATEGIES == ("uniform", "active")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_draw_is_reproducible_from_its_seed(strategy):
    risk = _risk(20_000)
    first = draw(strategy=strategy, risk=risk, sample_size=500, seed=11)
    again = draw(strategy=strategy, risk=risk, sample_size=500, seed=11)
    other = draw(strategy=strategy, risk=risk, sample_size=500, seed=12)
    assert np.array_equal(first.order, again.order)
    assert np.array_equal(first.inclusion, again.inclusion)
    assert not np.array_equal(first.order, other.order)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_member_has_a_known_probability_above_zero(strategy):
    risk = _risk(30_000)
    sample = draw(strategy=strategy, risk=risk, sample_size=700, seed=3)
    assert sample.order.dtype == np.int64 and sample.inclusion.dtype == np.float64
    assert sample.sample_size == len(sample.order) == 700
    assert len(np.unique(sample.order)) == 700
    assert sample.order.min() >= 0 and sample.order.max() < 30_000
    assert sample.inclusion.shape == (30_000,)
    assert (sample.inclusion > 0).all() and (sample.inclusion <= 1).all()
    assert sample.inclusion.sum() == pytest.approx(700)
    assert np.array_equal(sample.inclusion_of(sample.order[:5]), sample.inclusion[sample.order[:5]])
    if strategy == "uniform":
        assert np.allclose(sample.inclusion, 700 / 30_000)
    else:
        # The uniform share is a floor; riskier members are more likely drawn.
        assert sample.inclusion.min() >= sampling.UNIFORM_SHARE * 700 / 30_000 * (1 - 1e-9)
        assert np.corrcoef(risk, sample.inclusion)[0, 1] > 0.9


def test_uniform_needs_no_risk():
    sample = draw(strategy="uniform", risk=None, sample_size=10, seed=1, population_size=50)
    assert sample.population_size == 50 and sample.sample_size == 10
    assert np.allclose(sample.inclusion, 0.2)


def test_active_probabilities_are_the_realised_ones_whole_and_part_way():
    """Each member is drawn with its stated probability, and is among the first k decided with probability
    inclusion · k / n: over many draws, each member's frequency stays within a binomial band."""
    size, n, k, draws = 40, 14, 5, 6000
    risk = np.concatenate([np.linspace(0.0001, 0.01, 36), np.full(4, 0.9)])
    inclusion = inclusion_probabilities(risk, n)
    assert (inclusion[-4:] == 1).all()  # the riskiest members are capped: always drawn
    assert inclusion.sum() == pytest.approx(n)
    whole = np.zeros(size)
    head = np.zeros(size)
    for seed in range(draws):
        sample = draw(strategy="active", risk=risk, sample_size=n, seed=seed)
        whole[sample.order] += 1
        head[sample.order[:k]] += 1
    assert (np.abs(whole / draws - inclusion) <= _band(draws, inclusion)).all()
    part = inclusion * k / n
    assert (np.abs(head / draws - part) <= _band(draws, part)).all()


def test_uniform_heads_are_simple_random_samples():
    size, n, k, draws = 30, 10, 4, 6000
    head = np.zeros(size)
    pairs = np.zeros((size, size))
    for seed in range(draws):
        first = draw(strategy="uniform", risk=None, sample_size=n, seed=seed, population_size=size).order[:k]
        head[first] += 1
        pairs[np.ix_(first, first)] += 1
    assert (np.abs(head / draws - k / size) <= _band(draws, np.full(size, k / size))).all()
    # Pairs too: every pair of members is among the first k with probability k(k-1) / (N(N-1)).
    joint = k * (k - 1) / (size * (size - 1))
    off = pairs[~np.eye(size, dtype=bool)] / draws
    assert abs(off.mean() - joint) < 0.1 * joint
    assert (np.abs(off - joint) <= _band(draws, np.full(off.shape, joint))).all()


def test_the_decision_order_does_not_follow_the_risk():
    """People decide the sample in a random order: the first items are no riskier than the last."""
    risk = _risk(50_000, seed=5)
    heads, tails = [], []
    for seed in range(40):
        order = draw(strategy="active", risk=risk, sample_size=400, seed=seed).order
        heads.append(risk[order[:200]].mean())
        tails.append(risk[order[200:]].mean())
    difference = np.array(heads) - np.array(tails)
    assert abs(difference.mean()) < 4 * difference.std() / np.sqrt(len(difference))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_sample_of_the_whole_population(strategy):
    sample = draw(strategy=strategy, risk=_risk(25), sample_size=25, seed=2)
    assert sorted(sample.order.tolist()) == list(range(25))
    assert (sample.inclusion == 1).all()


def test_bad_arguments():
    risk = _risk(10)
    with pytest.raises(ValueError, match="unknown strategy"):
        draw(strategy="stratified", risk=risk, sample_size=2, seed=1)
    with pytest.raises(ValueError, match="sample_size"):
        draw(strategy="uniform", risk=risk, sample_size=0, seed=1)
    with pytest.raises(ValueError, match="sample_size"):
        draw(strategy="active", risk=risk, sample_size=11, seed=1)
    with pytest.raises(ValueError, match="risk"):
        draw(strategy="active", risk=None, sample_size=2, seed=1, population_size=10)
    with pytest.raises(ValueError, match="NaN"):
        draw(strategy="active", risk=np.array([0.1, np.nan, 0.2]), sample_size=2, seed=1)
    with pytest.raises(ValueError, match="empty"):
        draw(strategy="uniform", risk=np.zeros(0), sample_size=1, seed=1)


def test_a_million_members_draw_in_well_under_two_seconds():
    risk = _risk(1_000_000, seed=9)
    for strategy in STRATEGIES:
        started = time.perf_counter()
        sample = draw(strategy=strategy, risk=risk, sample_size=1000, seed=4)
        assert time.perf_counter() - started < 2.0
        assert sample.sample_size == 1000 and (sample.inclusion > 0).all()


def _one(**changes) -> float:
    values = {
        "judge_score": 0.8,
        "judge_confidence": 0.9,
        "judge_failed": 0.0,
        "criterion_spread": 0.1,
        "violations": 0,
        "has_duplicates": False,
    }
    values.update(changes)
    return float(rejection_risk(**values)[0])


def test_rejection_risk_is_a_probability_of_every_member():
    risk = _risk(10_000)
    assert risk.shape == (10_000,)
    assert ((risk > 0) & (risk < 1)).all()
    nothing = rejection_risk(
        judge_score=[np.nan, 0.5],
        judge_confidence=[np.nan, np.nan],
        judge_failed=[np.nan, np.nan],
        criterion_spread=[np.nan, np.nan],
        violations=[0, 0],
        has_duplicates=[False, False],
    )
    assert np.isfinite(nothing).all() and ((nothing > 0) & (nothing < 1)).all()


def test_rejection_risk_moves_the_obvious_ways():
    scores = np.linspace(0, 1, 21)
    for confidence in (0.0, 0.3, 1.0, np.nan):
        along = rejection_risk(
            judge_score=scores,
            judge_confidence=confidence,
            judge_failed=0.0,
            criterion_spread=0.0,
            violations=0,
            has_duplicates=False,
        )
        assert (np.diff(along) <= 1e-15).all()  # never rises with the score
    assert _one(judge_failed=1.0) > _one(judge_failed=0.0)
    assert _one(criterion_spread=0.6) > _one(criterion_spread=0.1)
    assert _one(violations=1) > _one(violations=0)
    assert _one(violations=3) > _one(violations=1)
    assert _one(has_duplicates=True) > _one(has_duplicates=False)
    # A member nobody scored is more uncertain than one a confident judge passed, less than one it failed.
    assert _one(judge_score=0.95) < _one(judge_score=np.nan) < 1.0
    assert abs(_one(judge_score=np.nan, criterion_spread=0.0) - 0.5) < 1e-9
    # Less confidence: the score's part nearer the middle, from either side.
    assert _one(judge_score=0.95, judge_confidence=0.3) > _one(judge_score=0.95, judge_confidence=1.0)
    assert _one(judge_score=0.05, judge_confidence=0.3) < _one(judge_score=0.05, judge_confidence=1.0)
