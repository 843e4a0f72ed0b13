"""Drawing an audit's sample from its frozen population, with every member's inclusion probability known.

Pure numpy: no Django, no database. `draw` takes the population's size (through `risk`, or `population_size` for
`uniform`), a strategy, a sample size and a seed, and returns the members to decide in the order people are given
them, with the inclusion probability of every member.

The design (both strategies are cases of it)
--------------------------------------------
A fixed-size sample of n members is drawn with inclusion probabilities π_i (Σ π_i = n), then put in a uniformly
random order, and people decide the items in that order. After k decisions the decided set is the first k of the
order: a simple random sample of k of the n drawn items. Its members' inclusion probabilities are therefore exactly
π_i · k / n, at every k, so an estimate made part-way through is as valid as one made at the end (a two-phase
design: Särndal, Swensson & Wretman 1992, *Model Assisted Survey Sampling*, ch. 9). The same holds when items are
decided out of order (holds, two people at once), as long as which items are done first does not depend on what
people decide.

- `uniform`: π_i = n/N. The order is a uniformly random draw of n members without replacement, so any prefix of k
  is a simple random sample without replacement of k from N (inclusion k/N).
- `active`: π_i ∝ a mix of the uniform share and √risk_i, capped at 1 (members at the cap are always drawn), then
  a randomised systematic πps draw: the population is put in a random order, the π_i are laid end to end on
  [0, n), and the members hit by the points u, u+1, …, u+n−1 (u uniform on [0, 1)) are drawn. Each member is drawn
  with probability exactly π_i and the size is exactly n (Goodman & Kish 1950; Hartley & Rao 1962 show that with
  the random order it behaves as a high-entropy design, so Deville's variance approximation applies:
  `estimation`).

  Why √risk: for a population share of rejections estimated with inclusion weights, the variance is smallest when
  π_i ∝ √E[(y_i − θ)²], which is close to √P(reject) when rejections are rare (Neyman allocation, Cochran 1977,
  §5.5); sampling in proportion to the risk itself over-concentrates on near-certain rejections and is worse than
  uniform once the judge is good. The uniform share (`UNIFORM_SHARE`) keeps every π_i ≥ UNIFORM_SHARE · n/N, so a
  member the risk wrongly calls safe still has a fair chance, and the worst case costs at most 1/UNIFORM_SHARE
  times the uniform variance.

Why not sequential Poisson or Pareto πps (rank by u_i/p_i, take the first k): their inclusion probabilities are
approximate, and which members are capped changes with k; here they are exact at every k and stored once.
Why not Poisson sampling: its size is random (an audit of 300 would plan 283 or 317, and sometimes 0 at small n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STRATEGIES = ("uniform", "active")

# The share of each active inclusion probability that is uniform: π_i ≥ UNIFORM_SHARE · n / N for every member.
UNIFORM_SHARE = 0.5

# The rejection risk model's weights (logit scale), see `rejection_risk`.
PASS_THRESHOLD = 0.7  # the judge's pass threshold (simulation.judge.PASS_THRESHOLD; repeated to stay Django-free)
RISK_BASE = -3.0  # the logit of the risk of an item the judge scored at the pass threshold, confidently
RISK_PER_SCORE = 6.0  # per point of score below the threshold
RISK_UNKNOWN = 0.0  # the logit of a member the judge has not scored: as likely rejected as not (most uncertain)
RISK_UNSTATED_CONFIDENCE = 0.5  # the confidence taken when the judge scored but stated none
RISK_FAILED = 0.8  # the judge's verdict is fail
RISK_PER_SPREAD = 2.0  # per point between the lowest and highest criterion score
RISK_VIOLATION = 1.5  # one unfixed rule violation ...
RISK_PER_EXTRA_VIOLATION = 0.4  # ... and each further one, up to RISK_VIOLATIONS_COUNTED
RISK_VIOLATIONS_COUNTED = 4
RISK_DUPLICATE = 0.4  # a member of a near-duplicate cluster
RISK_FLOOR = 1e-4  # risks are kept inside [RISK_FLOOR, 1 - RISK_FLOOR]


def _array(values, dtype=np.float64) -> np.ndarray:
    return np.asarray(values, dtype=dtype).reshape(-1)


def rejection_risk(
    *, judge_score, judge_confidence, judge_failed, criterion_spread, violations, has_duplicates
) -> np.ndarray:
    """A prediction, in (0, 1), that a person rejects each member: a logistic model of what the judge and the rules
    said. All arguments are arrays of one length (scalars broadcast); NaN means "nothing known".

    - `judge_score` (0-1, the mean criterion score; higher is better): the logit is RISK_BASE at PASS_THRESHOLD
      and falls by RISK_PER_SCORE per point above it. NaN (no verdict, or the judge failed to answer) gives the
      logit RISK_UNKNOWN (a risk of 1/2): a member nobody has scored is treated as the most uncertain.
    - `judge_confidence` (0-1, c): the score's logit is mixed with the unknown one, c · scored + (1 − c) · unknown,
      so a less confident judge leaves the risk nearer the middle; NaN (no stated confidence) counts as 1/2.
    - `judge_failed` (1 failed, 0 passed, NaN no verdict): adds RISK_FAILED when 1.
    - `criterion_spread` (highest minus lowest criterion score, 0-1): disagreement between criteria hides a bad
      criterion behind a good mean; adds RISK_PER_SPREAD per point. NaN counts as 0.
    - `violations` (unfixed rule violations): adds RISK_VIOLATION for the first and RISK_PER_EXTRA_VIOLATION for
      each further one, up to RISK_VIOLATIONS_COUNTED.
    - `has_duplicates`: adds RISK_DUPLICATE.

    Monotone: the risk never rises with the score (at any confidence), never falls with the verdict failing, the
    spread, the violations or duplicates; lower confidence moves the score's part toward the middle.
    The weights are a stated prior, not fitted: the estimates stay valid whatever they are (they only change which
    members are more likely drawn, and how much the judge's predictions help); a better risk only narrows them.
    """
    score = _array(judge_score)
    n = score.shape[0]
    confidence = np.broadcast_to(_array(judge_confidence), (n,))
    failed = np.broadcast_to(_array(judge_failed), (n,))
    spread = np.broadcast_to(_array(criterion_spread), (n,))
    count = np.broadcast_to(_array(violations), (n,))
    duplicate = np.broadcast_to(_array(has_duplicates), (n,))

    known = ~np.isnan(score)
    weight = np.clip(np.nan_to_num(confidence, nan=RISK_UNSTATED_CONFIDENCE), 0.0, 1.0)
    scored = RISK_BASE + RISK_PER_SCORE * (PASS_THRESHOLD - np.clip(np.where(known, score, PASS_THRESHOLD), 0.0, 1.0))
    logit = np.where(known, weight * scored + (1.0 - weight) * RISK_UNKNOWN, RISK_UNKNOWN)
    logit = logit + RISK_FAILED * (np.nan_to_num(failed, nan=0.0) > 0.5)
    logit = logit + RISK_PER_SPREAD * np.clip(np.nan_to_num(spread, nan=0.0), 0.0, 1.0)
    extra = np.clip(np.nan_to_num(count, nan=0.0), 0, RISK_VIOLATIONS_COUNTED) - 1
    logit = logit + np.where(extra >= 0, RISK_VIOLATION + RISK_PER_EXTRA_VIOLATION * extra, 0.0)
    logit = logit + RISK_DUPLICATE * (np.nan_to_num(duplicate, nan=0.0) > 0.5)
    risk = 1.0 / (1.0 + np.exp(-logit))
    return np.clip(risk, RISK_FLOOR, 1.0 - RISK_FLOOR)


@dataclass(frozen=True, eq=False)
class Draw:
    """A drawn sample. `order`: the population positions (0 … N−1) of the sampled members, in the order people
    decide them (length `sample_size`). `inclusion`: the inclusion probability of every member of the population
    (length N, all > 0, summing to `sample_size`). After k decisions the decided members' inclusion probabilities
    are inclusion[order[:k]] · k / sample_size (the estimators compute this themselves from `planned`)."""

    strategy: str
    seed: int
    population_size: int
    order: np.ndarray  # int64 positions
    inclusion: np.ndarray  # float64, one per member

    @property
    def sample_size(self) -> int:
        return int(self.order.shape[0])

    def inclusion_of(self, positions) -> np.ndarray:
        """The (planned-sample) inclusion probabilities of the members at `positions`."""
        return self.inclusion[np.asarray(positions, dtype=np.int64)]


def inclusion_probabilities(risk: np.ndarray, sample_size: int, *, uniform_share: float = UNIFORM_SHARE) -> np.ndarray:
    """π_i for `active`: n · (uniform_share / N + (1 − uniform_share) · √risk_i / Σ√risk), with the members whose
    π would pass 1 set to 1 and the rest scaled up to keep Σπ = n (repeated until none passes 1)."""
    risk = _array(risk)
    size = risk.shape[0]
    if np.isnan(risk).any() or (risk < 0).any() or (risk > 1).any():
        raise ValueError("risk must lie in [0, 1] with no NaN (rejection_risk gives that)")
    if sample_size >= size:
        return np.ones(size)
    root = np.sqrt(risk)
    total = root.sum()
    share = np.full(size, 1.0 / size) if total <= 0 else uniform_share / size + (1.0 - uniform_share) * root / total
    inclusion = sample_size * share
    capped = np.zeros(size, dtype=bool)
    while True:
        over = (inclusion > 1.0) & ~capped
        if not over.any():
            break
        capped |= over
        free = ~capped
        inclusion[capped] = 1.0
        inclusion[free] = share[free] * (sample_size - capped.sum()) / share[free].sum()
    return inclusion


def _systematic(inclusion: np.ndarray, sample_size: int, rng: np.random.Generator) -> np.ndarray:
    """Randomised systematic πps: members in a random order, probabilities laid end to end on [0, n), the members
    hit by u, u+1, …, u+n−1 drawn. Exactly n members; member i drawn with probability inclusion[i]."""
    shuffled = rng.permutation(inclusion.shape[0])
    ends = np.cumsum(inclusion[shuffled])
    ends *= sample_size / ends[-1]  # the sum is n up to rounding; make the last end exactly n
    points = rng.random() + np.arange(sample_size, dtype=np.float64)
    hit = np.searchsorted(ends, points, side="right")
    hit = np.unique(np.minimum(hit, inclusion.shape[0] - 1))
    if hit.shape[0] != sample_size:  # only a rounding tie can do this (probability ~1e-16): fill from the rest
        rest = np.setdiff1d(np.arange(inclusion.shape[0]), hit)
        hit = np.sort(np.concatenate([hit, rest[: sample_size - hit.shape[0]]]))[:sample_size]
    return shuffled[hit]


def draw(
    *,
    strategy: str,
    risk: np.ndarray | None,
    sample_size: int,
    seed: int,
    population_size: int | None = None,
) -> Draw:
    """Draw `sample_size` members of a population of N: N = len(risk), or `population_size` when `risk` is None
    (allowed for `uniform` only; with `risk` given, `uniform` ignores its values). Reproducible: the same arguments
    give the same draw (numpy's PCG64 seeded with `seed`). About 0.2 s at N = 1,000,000."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
    if risk is None:
        if strategy != "uniform":
            raise ValueError("the active strategy needs a risk for every member")
        if population_size is None:
            raise ValueError("give risk or population_size")
        size = int(population_size)
    else:
        risk = _array(risk)
        size = risk.shape[0]
        if population_size is not None and population_size != size:
            raise ValueError("population_size does not match len(risk)")
    if size < 1:
        raise ValueError("the population is empty")
    if not 1 <= sample_size <= size:
        raise ValueError(f"sample_size must be between 1 and the population size ({size})")
    rng = np.random.Generator(np.random.PCG64(seed))
    if strategy == "uniform":
        order = rng.choice(size, size=sample_size, replace=False, shuffle=True).astype(np.int64)
        inclusion = np.full(size, sample_size / size)
    else:
        assert risk is not None
        inclusion = inclusion_probabilities(risk, sample_size)
        drawn = _systematic(inclusion, sample_size, rng)
        order = rng.permutation(drawn).astype(np.int64)
    return Draw(strategy=strategy, seed=seed, population_size=size, order=order, inclusion=inclusion)
