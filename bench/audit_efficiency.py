"""How many human decisions an audit needs: uniform against active sampling, human-only against prediction-powered,
over labelled populations replayed many times (simia_web.audits.sampling and .estimation, as the audit pages use
them).

The populations (a stated model of which items a person rejects)
- Synthetic (default): N members (--population, 50,000). Each has a latent probability that a person rejects it,
  from a Beta mixture: most are clean (Beta(1, 199), mean 0.5%), a minority doubtful (Beta(3, 4), mean 3/7), in
  the proportion that makes the expected share rejected 2%, 5% or 10%; people's decisions are Bernoulli draws of
  it. The judge sees the decision through noise: a signal x = d·y + ε (ε standard normal, d = √2·Φ⁻¹(AUC), the
  binormal model of an ROC curve), reported as a mean criterion score 1/(1 + e^(1.5x − 2)) rounded to the
  project's grid of 0.02, stated with confidence 0.9, failed below 0.7; no rule violations, no near-duplicates, so
  the judge's score is all the audit has to go on. Target AUC 0.7, 0.8 and 0.9; the AUC achieved (of the
  rejection risk, ties counted half) is reported.
- --loader: the members of a database loaded by the project's loader (bench/review_data.py, through
  DATABASE_URL), with their real judge scores, confidences, verdicts, criterion scores, violations and
  near-duplicate clusters. A person rejects a member with probability 1/(1 + e^−(c + d·z)), z the normal score of
  its rank by judge score (lowest score, highest z), c set for the share rejected: the binormal model again, run
  the other way. Without --loader nothing needs Django or a database.

Each repetition draws a new population (new decisions, and for the synthetic one new judge scores), computes the
rejection risk with `rejection_risk` (the judge's predictions are the same risk), draws a sample of 1,500 with
each strategy (seed = the repetition's), and computes both intervals after k decisions in the sample's order, on a
grid of k from 40 to 1,500. Reported over the repetitions:
- coverage of each 95% interval after 100, 300 and 1,000 decisions (of the population's own share rejected);
- mean half-width, (high − low)/2, after 100, 300 and 1,000 decisions;
- decisions needed for ±2 points: the k at which the mean half-width reaches 0.02 (log-log interpolation on the
  grid), and the saving of each arm against uniform human-only (the issue's target: at least 30% with a judge of
  AUC ≥ 0.8);
- the ceiling: the saving of the best design using the judge's signal with a perfectly calibrated judge,
  1 − (E √(q(1 − q)))² / (θ(1 − θ)) with q = P(rejected | signal) (the Godambe-Joshi bound, reached by sampling
  in proportion to √(q(1 − q)) and correcting with q), synthetic populations only.

    python bench/audit_efficiency.py [--reps 1000] [--seed 1] [--population 50000]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_100k python bench/audit_efficiency.py --loader

Progress goes to stderr, the Markdown tables to stdout.
"""

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simia_web.audits import estimation, sampling  # noqa: E402  (the project is on the path now)

RATES = (0.02, 0.05, 0.10)
AUCS = (0.7, 0.8, 0.9)
REPORTED = (100, 300, 1000)
PLANNED = 1500
GRID = tuple(sorted({*np.unique(np.round(np.geomspace(40, PLANNED, 30)).astype(int)).tolist(), *REPORTED}))
HALF_WIDTH = 0.02
ARMS = (("uniform", "human"), ("uniform", "powered"), ("active", "human"), ("active", "powered"))
ARM_NAMES = {
    ("uniform", "human"): "uniform, human-only",
    ("uniform", "powered"): "uniform, prediction-powered",
    ("active", "human"): "active, human-only",
    ("active", "powered"): "active, prediction-powered",
}
NORMAL = NormalDist()


def separation(auc: float) -> float:
    """d of the binormal model with this AUC: AUC = Φ(d/√2)."""
    return math.sqrt(2) * NORMAL.inv_cdf(auc)


def latent_labels(rng: np.random.Generator, size: int, rate: float) -> np.ndarray:
    doubtful = rng.random(size) < (rate - 0.005) / (3 / 7 - 0.005)
    latent = np.where(doubtful, rng.beta(3, 4, size), rng.beta(1, 199, size))
    return (rng.random(size) < latent).astype(np.float64)


def synthetic_population(rng: np.random.Generator, size: int, rate: float, auc: float):
    """(labels, risk, ceiling): people's decisions, the rejection risk from the judge's verdicts, and the best
    possible variance ratio against uniform human-only with this judge."""
    labels = latent_labels(rng, size, rate)
    d = separation(auc)
    signal = d * labels + rng.standard_normal(size)
    score = np.round(1 / (1 + np.exp(1.5 * signal - 2.0)) / 0.02) * 0.02
    risk = sampling.rejection_risk(
        judge_score=score,
        judge_confidence=0.9,
        judge_failed=(score < 0.7).astype(np.float64),
        criterion_spread=0.0,
        violations=0,
        has_duplicates=False,
    )
    theta = labels.mean()
    # q = P(rejected | signal) under the binormal model with the population's share.
    log_odds = math.log(theta / (1 - theta)) + d * signal - d * d / 2
    q = 1 / (1 + np.exp(-log_odds))
    ceiling = float(np.mean(np.sqrt(q * (1 - q))) ** 2 / (theta * (1 - theta)))
    return labels, risk, ceiling


class Loaded:
    """The members of the project's loaded database: their rejection risk, and the normal scores of their ranks
    by judge score (lowest score first), which the stated model turns into people's decisions."""

    def __init__(self):
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")
        import django

        django.setup()
        from simia_web.audits.population import population_read
        from simia_web.audits.services import members_risk
        from simia_web.curation.models import Trajectory

        started = time.perf_counter()
        members = population_read(Trajectory.objects.all())
        print(f"read {len(members):,} members in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        if len(members) < 2 * PLANNED:
            sys.exit(f"the loaded database has {len(members)} trajectories; load at least {2 * PLANNED}")
        self.risk = members_risk(members)
        badness = -np.nan_to_num(members.judge_score, nan=0.5)
        ranks = average_ranks(badness)
        self.z = np.array([NORMAL.inv_cdf(p) for p in (ranks - 0.5) / len(ranks)])

    def population(self, rng: np.random.Generator, rate: float, auc: float):
        d = separation(auc)
        low, high = -30.0, 30.0
        for _ in range(100):  # the intercept giving the share `rate`
            middle = (low + high) / 2
            if np.mean(1 / (1 + np.exp(-(middle + d * self.z)))) < rate:
                low = middle
            else:
                high = middle
        probability = 1 / (1 + np.exp(-(low + d * self.z)))
        labels = (rng.random(len(self.z)) < probability).astype(np.float64)
        return labels, self.risk, math.nan


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their average."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def auc_of(risk: np.ndarray, labels: np.ndarray) -> float:
    """The probability that a rejected member has a higher risk than an accepted one, ties counted half."""
    ranks = average_ranks(risk)
    positives = labels == 1
    n1, n0 = int(positives.sum()), int((~positives).sum())
    return float((ranks[positives].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def replay(labels: np.ndarray, risk: np.ndarray, seed: int) -> np.ndarray:
    """(arm, grid k, [estimate, low, high]) for one population and one seed."""
    size = len(labels)
    prediction_sum = float(risk.sum())
    out = np.zeros((len(ARMS), len(GRID), 3))
    for strategy in sampling.STRATEGIES:
        sample = sampling.draw(strategy=strategy, risk=risk, sample_size=PLANNED, seed=seed)
        for g, k in enumerate(GRID):
            decided = sample.order[:k]
            common = dict(
                labels=labels[decided], inclusion=sample.inclusion[decided], planned=PLANNED, population_size=size
            )
            human = estimation.human_only(**common)
            powered = estimation.prediction_powered(
                **common, predictions_sampled=risk[decided], prediction_population_sum=prediction_sum
            )
            for kind, interval in (("human", human), ("powered", powered)):
                out[ARMS.index((strategy, kind)), g] = (interval.error_rate, interval.low, interval.high)
    return out


def needed(mean_half_width: np.ndarray) -> float:
    """The k at which the mean half-width first reaches HALF_WIDTH, interpolated on log k and log width."""
    below = np.flatnonzero(mean_half_width <= HALF_WIDTH)
    if not len(below):
        return math.inf
    j = int(below[0])
    if j == 0:
        return float(GRID[0])
    k0, k1 = math.log(GRID[j - 1]), math.log(GRID[j])
    w0, w1 = math.log(mean_half_width[j - 1]), math.log(mean_half_width[j])
    return math.exp(k0 + (math.log(HALF_WIDTH) - w0) * (k1 - k0) / (w1 - w0))


def setting(make, rate: float, auc: float, reps: int, seed: int) -> dict:
    coverage = np.zeros((len(ARMS), len(GRID)))
    half_width = np.zeros((len(ARMS), len(GRID)))
    error = np.zeros((len(ARMS), len(GRID)))
    aucs, truths, ceilings = [], [], []
    for rep in range(reps):
        rng = np.random.default_rng([seed, int(rate * 1000), int(auc * 100), rep])
        labels, risk, ceiling = make(rng, rate, auc)
        truth = float(labels.mean())
        results = replay(labels, risk, seed=seed * 1_000_003 + rep)
        coverage += (results[..., 1] <= truth) & (truth <= results[..., 2])
        half_width += (results[..., 2] - results[..., 1]) / 2
        error += results[..., 0] - truth
        truths.append(truth)
        ceilings.append(ceiling)
        if rep < 20:  # the AUC settles within a few populations
            aucs.append(auc_of(risk, labels))
    return {
        "rate": rate,
        "auc": auc,
        "auc_achieved": float(np.mean(aucs)),
        "truth": float(np.mean(truths)),
        "coverage": coverage / reps,
        "half_width": half_width / reps,
        "bias": error / reps,
        "ceiling": float(np.mean(ceilings)),
        "reps": reps,
    }


def percent(value: float) -> str:
    return f"{100 * value:.1f}"


def tables(results: list[dict]) -> str:
    at = [GRID.index(k) for k in REPORTED]
    lines = ["### Coverage of the 95% intervals (%), after 100 / 300 / 1,000 decisions", ""]
    lines.append("| rejected | judge AUC (risk AUC achieved) | " + " | ".join(ARM_NAMES[arm] for arm in ARMS) + " |")
    lines.append("|---|---|" + "---|" * len(ARMS))
    for r in results:
        cells = [" / ".join(percent(r["coverage"][a, g]) for g in at) for a in range(len(ARMS))]
        lines.append(f"| {percent(r['rate'])}% | {r['auc']} ({r['auc_achieved']:.3f}) | " + " | ".join(cells) + " |")
    lines += ["", "### Mean half-width (points), after 100 / 300 / 1,000 decisions", ""]
    lines.append("| rejected | judge AUC | " + " | ".join(ARM_NAMES[arm] for arm in ARMS) + " |")
    lines.append("|---|---|" + "---|" * len(ARMS))
    for r in results:
        cells = [" / ".join(f"{100 * r['half_width'][a, g]:.2f}" for g in at) for a in range(len(ARMS))]
        lines.append(f"| {percent(r['rate'])}% | {r['auc']} | " + " | ".join(cells) + " |")
    lines += ["", "### Decisions needed for ±2 points (saving against uniform human-only)", ""]
    lines.append(
        "| rejected | judge AUC | "
        + " | ".join(ARM_NAMES[arm] for arm in ARMS)
        + " | ceiling (calibrated judge, best design) |"
    )
    lines.append("|---|---|" + "---|" * (len(ARMS) + 1))
    for r in results:
        counts = [needed(r["half_width"][a]) for a in range(len(ARMS))]
        cells = []
        for a, count in enumerate(counts):
            if math.isinf(count):
                cells.append(f"> {PLANNED}")
            elif a == 0 or math.isinf(counts[0]):
                cells.append(f"{count:.0f}")
            else:
                saving = 1 - count / counts[0]
                cells.append(f"{count:.0f} ({'−' if saving >= 0 else '+'}{100 * abs(saving):.0f}%)")
        ceiling = "–" if math.isnan(r["ceiling"]) else f"−{100 * (1 - r['ceiling']):.0f}%"
        lines.append(f"| {percent(r['rate'])}% | {r['auc']} | " + " | ".join(cells) + f" | {ceiling} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000, help="repetitions per setting (at least 200)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--population", type=int, default=50_000, help="members of a synthetic population")
    parser.add_argument("--loader", action="store_true", help="the members of DATABASE_URL's loaded database")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--aucs", default=",".join(map(str, AUCS)))
    args = parser.parse_args()
    if args.reps < 200:
        parser.error("--reps: at least 200")
    if args.loader:
        loaded = Loaded()
        make = loaded.population
        source = f"the loaded database ({len(loaded.z):,} members)"
    else:
        size = args.population

        def make(rng, rate, auc):
            return synthetic_population(rng, size, rate, auc)

        source = f"synthetic populations of {size:,}"
    started = time.perf_counter()
    results = []
    for rate in map(float, args.rates.split(",")):
        for auc in map(float, args.aucs.split(",")):
            began = time.perf_counter()
            results.append(setting(make, rate, auc, args.reps, args.seed))
            print(f"rate {rate} AUC {auc}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    cpus = os.cpu_count()
    print(
        f"{source}; {args.reps} repetitions per setting, seed {args.seed}; samples of {PLANNED} per repetition; "
        f"{elapsed:.0f} s on {cpus} CPUs ({platform.machine()}), numpy {np.__version__}\n"
    )
    print(tables(results))


if __name__ == "__main__":
    main()
