"""The dataset card written with every snapshot: a Hugging Face `README.md` (YAML header and text) and its plots
(PNG, matplotlib's Agg backend) in `images/`.

Its numbers are the records' as written (card_facts.DatasetFacts) and the gate's refusals, the snapshot's own
counts. What is read besides is named as such in the card: the LLM call rows the records cite, the seeds they
name, and the judge-vs-human agreement over each domain's reviewed items (records not in the snapshot included).
"""

import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
from django.conf import settings
from huggingface_hub import DatasetCard, DatasetCardData

from simia_web.catalog.models import Domain, Seed
from simia_web.curation.selectors.agreement import agreement, cohen_kappa
from simia_web.formats.parquet import hf_features

from .card_facts import DatasetFacts, Distribution
from .files import FileDigest, digest_of
from .models import FileKind

matplotlib.use("Agg")  # files only, no display; before pyplot is imported
from matplotlib import pyplot  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

CARD = "README.md"
AGREEMENT_DOMAINS = 20  # the domain-wide agreement is read for the largest domains of the snapshot, up to this many
LISTED = 50  # rows of a long table (APIs, seeds) shown; the rest are summed in one line
TAGS = ["tool-calling", "function-calling", "agents", "multi-turn", "synthetic", "simia"]
SIZE_CATEGORIES = [
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
]


def _cell(value) -> str:
    """Text from the data (names, models) made safe for a Markdown table cell."""
    text = " ".join(str(value).split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;") or "—"


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "—"


def _counted(counter: Counter, names: dict | None = None, *, shares: bool = True) -> str:
    """A table of records per key, the most first; with `shares` when each record counts under one key only."""
    rows = [[(names or {}).get(key, key), n] for key, n in counter.most_common(LISTED)]
    rest = counter.most_common()[LISTED:]
    if rest:
        rows.append([f"{len(rest)} more", sum(n for _, n in rest)])
    if shares:
        rows = [[*row, _share(row[1], counter.total())] for row in rows]
    return _table(["", "records", *(["share"] if shares else [])], rows) if rows else "None."


def _records(n: int) -> str:
    return f"{n} record{'' if n == 1 else 's'}"


def size_category(count: int) -> str:
    return next((label for limit, label in SIZE_CATEGORIES if count < limit), "n>100M")


def _plot(distribution: Distribution, title: str, unit: str) -> bytes | None:
    """A histogram of the records' values as a PNG; None when there is nothing to plot."""
    if not distribution.counts:
        return None
    values, counts = zip(*sorted(distribution.counts.items()), strict=True)
    # One bar per value when there are few, else 40 bins.
    bins = [value - 0.5 for value in range(values[0], values[-1] + 2)] if values[-1] - values[0] <= 40 else 40
    figure, axes = pyplot.subplots(figsize=(6, 3.2), dpi=100)
    try:
        axes.hist(values, bins=bins, weights=counts, color="#3b6ea5", edgecolor="white")
        axes.set_title(title)
        axes.set_xlabel(unit)
        axes.set_ylabel("records")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        figure.tight_layout()
        png = io.BytesIO()
        figure.savefig(png, format="png")
    finally:
        pyplot.close(figure)
    return png.getvalue()


def _summary_rows(facts: DatasetFacts) -> list[list]:
    rows = []
    for label, distribution in (
        ("turns (user and assistant messages)", facts.turns),
        ("tool calls", facts.tool_calls),
        (facts.length.unit, facts.lengths),
    ):
        s = distribution.summary()
        if s:
            rows.append([label, s["total"], f"{s['mean']:.1f}", s["min"], s["median"], s["p90"], s["p99"], s["max"]])
    return rows


@dataclass
class CardInput:
    """What the card says about the snapshot beside the facts."""

    format: str
    label: str
    filters: dict
    refused: int
    refusal_reasons: Counter
    data_files: list[FileDigest]
    manifest: FileDigest
    about: dict = field(default_factory=dict)  # snapshot id, who asked


def _yaml(facts: DatasetFacts, card: CardInput) -> DatasetCardData:
    extra: dict[str, Any] = {}
    if card.format == "parquet":
        extra["configs"] = [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]}]
        extra["dataset_info"] = {
            "features": hf_features(),
            "splits": [{"name": "train", "num_examples": facts.records}],
            "download_size": sum(f.bytes for f in card.data_files),
        }
    return DatasetCardData(
        license=settings.DATASET_CARD_LICENSE,
        pretty_name=card.label,
        task_categories=["text-generation"],
        tags=TAGS,
        size_categories=[size_category(facts.records)],
        **extra,
    )


def _loading(card: CardInput) -> str:
    data = card.data_files[0].name
    return {
        "parquet": "```python\nfrom datasets import load_dataset\n\n"
        'dataset = load_dataset("parquet", data_files="data/train-*.parquet", split="train")\n```\n\n'
        "`messages` is a list of `{role, content, tool_calls, tool_call_id}` (`tool_calls` a list of "
        "`{id, type, function: {name, arguments}}`, `arguments` a JSON string); `tools` a list of "
        "`{type, function: {name, description, parameters}}` with `parameters` the JSON Schema as a JSON string "
        "(schemas differ from tool to tool). Other columns: `trajectory_id`, `version`, `domain`, `kind`, "
        "`status`, `num_turns`, `num_tool_calls`, `tool_names`, `termination_reason`, `reward`, `judge_passed`, "
        "`judge_score`, `human_decision`, `model`, `task_id`, `seed_id`, `job_id`.",
        "openai": f"`{data}` is OpenAI chat fine-tuning JSONL: one `{{messages, tools}}` object per line.",
        "sharegpt": f"`{data}` is a LLaMA-Factory ShareGPT zip: unzip it and pass the folder as `dataset_dir`.",
        "tau2": f"`{data}` is one JSON document in the layout of τ²-bench results: `tasks` and `simulations`.",
    }[card.format]


def _contents(facts: DatasetFacts, domains: dict) -> list[str]:
    apis = facts.api_calls
    api_rows = [[name, n, facts.api_records[name]] for name, n in apis.most_common(LISTED)]
    if len(apis) > LISTED:
        rest = apis.most_common()[LISTED:]
        api_rows.append([f"{len(rest)} more", sum(n for _, n in rest), "—"])
    return [
        "## Contents",
        "### By domain",
        _counted(facts.by_domain, domains),
        "### By status",
        _counted(facts.by_status),
        "### By kind",
        _counted(facts.by_kind),
        "### APIs (tools) called",
        _table(["API", "calls", "records calling it"], api_rows) if api_rows else "No tool calls.",
    ]


def _sizes(facts: DatasetFacts, images: list[str]) -> list[str]:
    rows = _summary_rows(facts)
    lines = [
        "## Turns, tool calls and length",
        f"Length is in {facts.length.unit}: {facts.length.note}; it counts every message's content and every tool "
        "call's name and arguments, not the tools list nor a chat template's markup.",
        _table(["per record", "total", "mean", "min", "median", "p90", "p99", "max"], rows) if rows else "No records.",
    ]
    lines += [f"![{Path(image).stem.replace('_', ' ')}]({image})" for image in images]
    return lines


def _judge(facts: DatasetFacts, domains: dict) -> list[str]:
    judged, passed = facts.judged_by_domain.total(), facts.passed_by_domain.total()
    headline = f"{judged} of {facts.records} records carry a judge verdict; {passed} passed ({_share(passed, judged)})."
    if facts.judge_scores.n:
        headline += f" Mean score {facts.judge_scores.mean:.3f}."
    lines = ["## Judge", headline]
    if judged:
        rows = [
            [domains.get(d, d), n, facts.passed_by_domain[d], _share(facts.passed_by_domain[d], n)]
            for d, n in facts.judged_by_domain.most_common(LISTED)
        ]
        lines.append(_table(["domain", "judged", "passed", "pass rate"], rows))
    if facts.criteria:
        rows = [[name, f"{total.mean:.3f}", total.n] for name, total in sorted(facts.criteria.items())]
        lines += ["Judge scores per criterion (0 to 1):", _table(["criterion", "mean score", "records"], rows)]
    return lines


def _humans(facts: DatasetFacts, domains: dict) -> list[str]:
    lines = ["## Human review", "Standing decisions on the records written:", _counted(facts.decisions)]
    matrix = dict(facts.agreement)
    total = sum(matrix.values())
    if total:
        agreed = matrix.get((True, True), 0) + matrix.get((False, False), 0)
        kappa = cohen_kappa(matrix)
        cells = [
            ["judge pass", matrix.get((True, True), 0), matrix.get((True, False), 0)],
            ["judge fail", matrix.get((False, True), 0), matrix.get((False, False), 0)],
        ]
        lines += [
            f"Judge against the person, over the {total} records with both a verdict and an individual decision "
            f"(bulk decisions are not counted): agreement {agreed / total:.1%}, Cohen's kappa "
            f"{'undefined' if kappa is None else f'{kappa:.3f}'}.",
            _table(["", "person accepted", "person rejected"], cells),
        ]
    else:
        lines.append("No record here has both a judge verdict and an individual human decision.")
    rows = []
    for domain_id, _ in facts.by_domain.most_common(AGREEMENT_DOMAINS):
        result = agreement(domain=domain_id, criteria=False)
        if result["total"]:
            kappa_shown = "undefined" if result["kappa"] is None else f"{result['kappa']:.3f}"
            rows.append([domains.get(domain_id, domain_id), result["total"], f"{result['agreement']:.1%}", kappa_shown])
    if rows:
        lines += [
            "Across every reviewed item of these domains (items not in this snapshot included, rejected ones too):",
            _table(["domain", "reviewed", "agreement", "Cohen's kappa"], rows),
        ]
    lines.append(
        "Per criterion: no per-criterion human ratings yet (people decide accept or reject; the judge's criteria "
        "scores above have no human counterpart to be compared with)."
    )
    return lines


def _audit(card: CardInput) -> list[str]:
    """The audit that certifies the snapshot (card.about["audit"], see exports.services.snapshot_certificate): what
    its interval means in one sentence, both intervals, and what the estimate rests on."""
    block = card.about.get("audit")
    if not block:
        return []
    rows = [
        [name, f"{i['error_rate']:.1%}", f"{i['low']:.1%} to {i['high']:.1%}", f"{i['confidence']:.0%}", i["method"]]
        for name, i in (
            ("estimate (judge corrected by people)", block["estimate"]),
            ("people only", block["human_only"]),
        )
        if i
    ]
    judges = "; ".join(
        f"{j['model'] or 'unknown model'}{' (' + j['profile'] + ')' if j['profile'] else ''} on {j['members']}"
        for j in block["judge"]
    )
    filters = ", ".join(f"`{_cell(k)}={_cell(v)}`" for k, v in block["filters"].items()) or "none"
    return [
        "## Audit",
        _cell(block["meaning"]),
        f"Audit {block['id']} froze a population of {block['population']} trajectories (filters {filters}) and drew "
        f"a {_cell(block['strategy'])} sample of {block['sample_size']} (seed {block['seed']}); people decided "
        f"{block['audited']} of them ({block['rejected']} rejected or accepted only after a fix). "
        f"{_records(block.get('records_accepted_on_evidence', 0))} here were accepted on this evidence; the "
        f"snapshot was certified under a ceiling of {block['max_error_rate']:.1%} on the upper bound.",
        _table(["interval", "error rate", "95% interval", "confidence", "method"], rows),
        f"Judge configuration over the population: {_cell(judges) if judges else 'no verdicts'}. The judge alone "
        f"predicts {block['judge_only']:.1%}.",
    ]


def _left_out(facts: DatasetFacts, card: CardInput) -> list[str]:
    lines = [
        "## Left out",
        f"{_records(card.refused)} matched the filters but failed the export gate (the strict conversation check or "
        f"the {card.format} format's validator) and are not in the data.",
    ]
    if card.refusal_reasons:
        lines.append(_table(["reason", "records"], [[r, n] for r, n in card.refusal_reasons.most_common(LISTED)]))
    if facts.duplicates is None:
        lines.append("Near-duplicates removed: not measured (this export does not deduplicate).")
    else:
        lines += [f"Near-duplicates removed: {facts.duplicates.total()}.", _counted(facts.duplicates)]
    return lines


def _fidelity(facts: DatasetFacts) -> list[str]:
    if facts.fidelity is None:
        return ["## Simulator fidelity", "Not measured: no simulated tool response here was compared with a real one."]
    outcomes = sorted({outcome for counts in facts.fidelity.values() for outcome in counts})
    rows = [[api, *(counts.get(o, 0) for o in outcomes)] for api, counts in sorted(facts.fidelity.items())]
    return ["## Simulator fidelity", _table(["API", *outcomes], rows)]


def _provenance(facts: DatasetFacts) -> list[str]:
    lines = ["## How it was made", "From the records' provenance (records naming each):"]
    for title, counter in (
        ("Models", facts.models),
        ("Endpoint profiles", facts.profiles),
        ("Prompt versions", facts.prompt_versions),
    ):
        lines += [f"### {title}", _counted(counter, shares=False)]
    calls = facts.calls
    lines.append("### LLM calls")
    if calls.rows:
        rows = [
            [stage, model, profile, version, n, failed, tokens_in, tokens_out]
            for (stage, model, profile, version), (n, failed, tokens_in, tokens_out) in sorted(calls.rows.items())
        ]
        header = ["stage", "model", "profile", "prompt version", "calls", "failed", "tokens in", "tokens out"]
        lines += [
            f"The {calls.cited} call rows the records cite ({calls.found} still stored):",
            _table(header, rows),
        ]
    else:
        lines.append("The records cite no stored LLM call (imported or written by people).")
    return lines


def _seeds(facts: DatasetFacts) -> list[str]:
    seeds = len(facts.seeds)
    lines = ["## Seeds", f"{_records(facts.seeds.total())} grew from {seeds} seed{'' if seeds == 1 else 's'}."]
    if facts.seeds:
        top = facts.seeds.most_common(LISTED)
        seed_rows = Seed.objects.in_bulk([seed_id for seed_id, _ in top])
        rows = []
        for seed_id, n in top:
            seed = seed_rows.get(seed_id)
            source = f"{seed.source_format} {seed.source_name} #{seed.source_record}" if seed else "(deleted)"
            rows.append([seed_id, source, n])
        lines.append(_table(["seed", "source", "records"], rows))
    return lines


def _files(card: CardInput) -> list[str]:
    rows = [[f.name, f.bytes, f.sha256] for f in [*card.data_files, card.manifest]]
    return [
        "## Files",
        "The manifest has a line per record (trajectory, version, decision, verdict, sha256 of the record); the "
        "report beside it lists what was left out and every file's sha256, this card's included.",
        _table(["file", "bytes", "sha256"], rows),
    ]


def card_write(folder: Path, facts: DatasetFacts, card: CardInput) -> list[FileDigest]:
    """Write README.md and its plots (images/*.png) into `folder`; returns their digests, the card last."""
    facts.finish()
    domains = dict(Domain.objects.filter(pk__in=list(facts.by_domain)).values_list("id", "name"))
    images, digests = [], []
    for name, distribution, title, unit in (
        ("turns", facts.turns, "Turns per record", "user and assistant messages"),
        ("tool_calls", facts.tool_calls, "Tool calls per record", "tool calls"),
        (facts.length.unit, facts.lengths, f"Length per record ({facts.length.unit})", facts.length.unit),
    ):
        png = _plot(distribution, title, unit)
        if png is not None:
            images.append(f"images/{name}.png")
            digests.append(digest_of(folder, images[-1], FileKind.IMAGE, png))
    filters = ", ".join(f"`{_cell(k)}={_cell(v)}`" for k, v in card.filters.items()) or "none"
    heading = f"Snapshot {card.about['snapshot']}" if card.about.get("snapshot") else card.label
    text = [
        f"# {_cell(heading)}",
        f"{facts.records} tool-calling conversations ({card.format} format) exported by Simia Web with the filters "
        f"{filters}. Every record passed the strict conversation check and the format's validator.",
        *_audit(card),
        "## Loading",
        _loading(card),
        *_contents(facts, domains),
        *_sizes(facts, images),
        *_judge(facts, domains),
        *_humans(facts, domains),
        *_left_out(facts, card),
        *_fidelity(facts),
        *_provenance(facts),
        *_seeds(facts),
        *_files(card),
    ]
    content = f"---\n{_yaml(facts, card).to_yaml()}\n---\n\n" + "\n\n".join(text) + "\n"
    body = str(DatasetCard(content)).encode()
    return [*digests, digest_of(folder, CARD, FileKind.CARD, body)]
