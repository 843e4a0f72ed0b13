"""What the dataset card says about the records, gathered as they are written: the writers hand every record that
passed the gate to DatasetFacts.add (its row with decision, verdict and provenance, and its conversation's measure), so
the card's counts are the data's. Memory stays flat: counters and exact distributions (by value), and the LLM call
rows the records cite are summed a few thousand ids at a time.

Two fields stay None, and the card says "not measured", until what measures them runs: `duplicates` (records an
export keeping one per near-duplicate cluster removed, by reason; set by exports.services) and `fidelity`
(simulated tool responses compared with a reference implementation, by API and outcome).
"""

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from simia_web.curation.models import Decision
from simia_web.formats.conversation import ConversationMeasure
from simia_web.llm.models import LLMCall

CALL_IDS_PER_QUERY = 5000


class Distribution:
    """An integer measure over the records, kept as exact counts per value: memory grows with the distinct values,
    not with the records, and every percentile is exact."""

    def __init__(self):
        self.counts: Counter[int] = Counter()

    def add(self, value: int) -> None:
        self.counts[value] += 1

    def summary(self) -> dict | None:
        n = sum(self.counts.values())
        if not n:
            return None
        values = sorted(self.counts.items())
        total = sum(value * count for value, count in values)

        def percentile(share: float) -> int:  # nearest rank
            rank, seen = max(1, math.ceil(share * n)), 0
            for value, count in values:
                seen += count
                if seen >= rank:
                    return value
            return values[-1][0]

        return {
            "records": n,
            "total": total,
            "mean": total / n,
            "min": values[0][0],
            "median": percentile(0.5),
            "p90": percentile(0.9),
            "p99": percentile(0.99),
            "max": values[-1][0],
        }


class ExactSum:
    """A sum of floats kept exact (Shewchuk's partials, as math.fsum keeps them), so that sums gathered over parts of
    the records and merged are the same float, to the last bit, as the sum gathered in one pass; `n` counts the
    values added."""

    def __init__(self, partials: Iterable[float] = (), n: int = 0):
        self.partials: list[float] = list(partials)
        self.n = n

    def add(self, value: float) -> None:
        self._add(value)
        self.n += 1

    def _add(self, x: float) -> None:
        kept = 0
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                self.partials[kept] = low
                kept += 1
            x = high
        self.partials[kept:] = [x]

    def merge(self, other: "ExactSum") -> None:
        for value in other.partials:
            self._add(value)
        self.n += other.n

    @property
    def total(self) -> float:
        return math.fsum(self.partials)

    @property
    def mean(self) -> float:
        return self.total / self.n


class RecordLength:
    """Tokens of the tokenizer named by DATASET_CARD_TOKENIZER (a `tokenizers` tokenizer.json), else characters."""

    def __init__(self, tokenizer_path: str):
        self.tokenizer, self.unit, self.note = None, "characters", "no tokenizer configured (SIMIA_CARD_TOKENIZER)"
        if tokenizer_path:
            from tokenizers import Tokenizer

            try:
                self.tokenizer = Tokenizer.from_file(tokenizer_path)
            except Exception as exc:  # a missing or unreadable file: the card says so and counts characters
                self.note = f"the tokenizer {tokenizer_path} could not be read ({type(exc).__name__}: {exc})"
            else:
                self.unit, self.note = "tokens", f"counted with the tokenizer {Path(tokenizer_path).name}"

    def __call__(self, parts: list[str]) -> int:
        """The length of a record's text, given as its parts (see DatasetFacts.add), joined by newlines."""
        if self.tokenizer is None:
            return sum(map(len, parts)) + len(parts) - 1 if parts else 0  # without building the joined text
        return len(self.tokenizer.encode("\n".join(parts), add_special_tokens=False).ids)


def _strings(value) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, dict):
        return [f"{stage}: {v}" for stage, v in value.items() if isinstance(v, str) and v]
    return []


def _staged(provenance: dict, many: str, one: str) -> list[str]:
    """The "stage: value" pairs a provenance names: `{many: {stage: value}}` (rollouts) or `{stage, one: value}`."""
    found = _strings(provenance.get(many))
    if isinstance(provenance.get(one), str) and provenance[one]:
        found.append(f"{provenance.get('stage') or 'unknown'}: {provenance[one]}")
    return found


class CallUsage:
    """The LLM call rows the records cite (their provenance's `llm_calls` and their verdict's call), summed by
    stage, model, endpoint profile and prompt version; read a few thousand ids at a time as the records stream."""

    def __init__(self):
        self.pending: list[int] = []
        self.rows: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # calls, failed, tokens in, out
        self.cited = 0

    def add(self, ids) -> None:
        self.pending += ids
        self.cited += len(ids)
        if len(self.pending) >= CALL_IDS_PER_QUERY:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        rows = LLMCall.objects.filter(pk__in=self.pending).values_list(
            "stage", "model", "profile__name", "prompt_version", "error", "tokens_in", "tokens_out"
        )
        for stage, model, profile, prompt_version, error, tokens_in, tokens_out in rows.order_by().iterator():
            usage = self.rows[(stage, model, profile or "", prompt_version)]
            usage[0] += 1
            usage[1] += bool(error)
            usage[2] += tokens_in
            usage[3] += tokens_out
        self.pending = []

    @property
    def found(self) -> int:
        return sum(usage[0] for usage in self.rows.values())


def _call_ids(row: dict) -> list[int]:
    ids = (row.get("provenance") or {}).get("llm_calls")
    ids = {i for i in ids if isinstance(i, int) and not isinstance(i, bool)} if isinstance(ids, list) else set()
    verdict_call = (row.get("verdict") or {}).get("llm_call")
    if verdict_call:
        ids.add(verdict_call)
    return sorted(ids)


@dataclass
class DatasetFacts:
    """What the card says about the records written, gathered one record at a time (add)."""

    length: RecordLength = field(default_factory=lambda: RecordLength(settings.DATASET_CARD_TOKENIZER))
    records: int = 0
    by_domain: Counter = field(default_factory=Counter)
    by_status: Counter = field(default_factory=Counter)
    by_kind: Counter = field(default_factory=Counter)
    api_calls: Counter = field(default_factory=Counter)
    api_records: Counter = field(default_factory=Counter)
    turns: Distribution = field(default_factory=Distribution)
    tool_calls: Distribution = field(default_factory=Distribution)
    lengths: Distribution = field(default_factory=Distribution)
    judged_by_domain: Counter = field(default_factory=Counter)
    passed_by_domain: Counter = field(default_factory=Counter)
    judge_scores: ExactSum = field(default_factory=ExactSum)
    criteria: dict = field(default_factory=lambda: defaultdict(ExactSum))
    decisions: Counter = field(default_factory=Counter)  # the standing human decision, "bulk " prefixed for bulk
    agreement: Counter = field(default_factory=Counter)  # (judge passed, person accepted) over individual decisions
    models: Counter = field(default_factory=Counter)
    profiles: Counter = field(default_factory=Counter)
    prompt_versions: Counter = field(default_factory=Counter)
    seeds: Counter = field(default_factory=Counter)
    calls: CallUsage = field(default_factory=CallUsage)
    duplicates: Counter | None = None  # {reason: records removed} when the export deduplicates
    fidelity: dict | None = None  # {api: {outcome: responses}} once the simulator is measured against a reference

    def add(self, row: dict, measure: ConversationMeasure) -> None:
        """One record as written: its row (domain_id, status, kind, seed_id, provenance, verdict, decision) and its
        conversation's measure. Called for every record of an export: counters touched only for what it has."""
        self.records += 1
        self.by_domain[row["domain_id"]] += 1
        self.by_status[row["status"]] += 1
        self.by_kind[row["kind"]] += 1
        names = measure.call_names
        for name in names:  # a loop: Counter.update costs more than counting the few names of a record
            self.api_calls[name] += 1
        for name in set(names):
            self.api_records[name] += 1
        self.turns.add(measure.turns)
        self.tool_calls.add(len(names))
        self.lengths.add(self.length(measure.text_parts))
        verdict = row.get("verdict") or {}
        self._judged(row["domain_id"], verdict)
        self._decided(row.get("decision") or {}, verdict)
        provenance = row.get("provenance")
        if provenance and isinstance(provenance, dict):
            for counter, many, one in self.STAGED:
                for found in _staged(provenance, many, one):
                    getattr(self, counter)[found] += 1
        if verdict.get("model"):
            self.models[f"judge: {verdict['model']}"] += 1
        if row.get("seed_id"):
            self.seeds[row["seed_id"]] += 1
        call_ids = _call_ids(row)
        if call_ids:
            self.calls.add(call_ids)

    # The counters of what a provenance names per stage, with the keys it names them under.
    STAGED = (
        ("models", "models", "model"),
        ("profiles", "profiles", "profile"),
        ("prompt_versions", "prompt_versions", "prompt_version"),
    )

    def _judged(self, domain_id: int, verdict: dict) -> None:
        if verdict.get("passed") is None:
            return
        self.judged_by_domain[domain_id] += 1
        self.passed_by_domain[domain_id] += bool(verdict["passed"])
        if isinstance(verdict.get("score"), (int, float)):
            self.judge_scores.add(verdict["score"])
        for name, value in (verdict.get("scores") or {}).items():
            value = value.get("score") if isinstance(value, dict) else value
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.criteria[name].add(value)

    def _decided(self, decision: dict, verdict: dict) -> None:
        if not decision.get("decision"):
            self.decisions["none"] += 1
            return
        self.decisions[("bulk " if decision.get("bulk") else "") + decision["decision"]] += 1
        passed = verdict.get("passed")
        if not decision.get("bulk") and passed is not None:  # as curation's agreement counts: individual decisions
            self.agreement[(bool(passed), decision["decision"] != Decision.REJECT)] += 1

    def finish(self) -> None:
        self.calls.flush()

    # The counters a part's facts carry, each as [key, n] pairs in the order the keys first came (JSON keeps a key's
    # type, an int or a string; a tuple comes back from a list), so that merged counters list their keys as one pass
    # would (most_common breaks ties by that order).
    COUNTERS = (
        "by_domain",
        "by_status",
        "by_kind",
        "api_calls",
        "api_records",
        "judged_by_domain",
        "passed_by_domain",
        "decisions",
        "agreement",
        "models",
        "profiles",
        "prompt_versions",
        "seeds",
    )
    DISTRIBUTIONS = ("turns", "tool_calls", "lengths")

    def as_part(self) -> dict:
        """The facts gathered over a part of the records, as JSON for merge_part (the LLM calls they cite summed)."""
        self.finish()
        return {
            "records": self.records,
            **{name: _pairs(getattr(self, name)) for name in self.COUNTERS},
            **{name: _pairs(getattr(self, name).counts) for name in self.DISTRIBUTIONS},
            "judge_scores": [self.judge_scores.partials, self.judge_scores.n],
            "criteria": [[name, total.partials, total.n] for name, total in self.criteria.items()],
            "calls": [[list(key), usage] for key, usage in self.calls.rows.items()],
            "calls_cited": self.calls.cited,
        }

    def merge_part(self, part: dict) -> None:
        """Add the facts of a part (as_part); merged in the records' order they are what one pass gathers."""
        self.records += part["records"]
        for name in self.COUNTERS:
            getattr(self, name).update(_from_pairs(part[name]))
        for name in self.DISTRIBUTIONS:
            getattr(self, name).counts.update(_from_pairs(part[name]))
        self.judge_scores.merge(ExactSum(*part["judge_scores"]))
        for name, partials, n in part["criteria"]:
            self.criteria[name].merge(ExactSum(partials, n))
        for key, usage in part["calls"]:
            total = self.calls.rows[tuple(key)]
            for i, value in enumerate(usage):
                total[i] += value
        self.calls.cited += part["calls_cited"]


def _pairs(counter: Counter) -> list:
    return [[list(key) if isinstance(key, tuple) else key, n] for key, n in counter.items()]


def _from_pairs(pairs: list) -> dict:
    return {tuple(key) if isinstance(key, list) else key: n for key, n in pairs}
