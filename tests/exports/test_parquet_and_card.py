"""Parquet snapshots as a training team reads them (with `datasets`, offline), their shards and checksums, the
dataset card's numbers against the snapshot's own files, and publishing to the Hub where it cannot happen."""

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import tracemalloc

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from django.core.management import call_command

from simia_web.accounts.models import User
from simia_web.catalog.models import Seed
from simia_web.curation.models import Decision, JudgeVerdict, Review, Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.curation.rollups import rollups_rebuild
from simia_web.exports import parquet_writer
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import ExportOptions, export_write, snapshot_create
from simia_web.jobs.models import JobStatus
from simia_web.llm.models import EndpointProfile, LLMCall

from .data import TOOLS, conversation, domain_make, trajectory_make

ORPHAN_RESULT = [
    {"role": "user", "content": "hi"},
    {"role": "tool", "tool_call_id": "nope", "content": "{}"},
    {"role": "assistant", "content": "hello"},
]
# A second tool whose schema shares nothing with get_order's: tools keep their parameters as JSON strings.
REFUND = {
    "type": "function",
    "function": {
        "name": "refund",
        "description": "Refund items of an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
                "reason": {"enum": ["damaged", "late"]},
            },
            "required": ["order_id", "items"],
        },
    },
}


def _refund_conversation() -> list[dict]:
    call = {
        "id": "r1",
        "type": "function",
        "function": {"name": "refund", "arguments": '{"order_id": "W9", "items": []}'},
    }
    lookup = {"id": "g1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W9"}'}}
    return [
        {"role": "user", "content": "Refund W9 — it came broken. ✓"},
        {"role": "assistant", "content": "", "tool_calls": [lookup, call]},
        {"role": "tool", "tool_call_id": "g1", "content": '{"status": "delivered"}'},
        {"role": "tool", "tool_call_id": "r1", "content": '{"refunded": true}'},
        {"role": "assistant", "content": "Done: W9 is refunded."},
    ]


@pytest.fixture
def eager(eager, settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.HF_TOKEN = ""


def _built(format: str, filters: dict, options: dict | None = None, actor=None):
    snapshot = snapshot_create(format=format, filters=filters, options=options, actor=actor)
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()
    assert snapshot.job.status == JobStatus.SUCCEEDED, (snapshot.job.error, snapshot.error)
    return snapshot


def _folder(settings, snapshot):
    return settings.EXPORTS_DIR / f"snapshot-{snapshot.pk}"


def _load_with_datasets(folder, tmp_path) -> dict:
    """In a process of its own, offline, as a training team would: load_dataset("parquet", data_files=...) and
    load_dataset(folder) (which reads the card's configs and dataset_info)."""
    script = textwrap.dedent(
        """
        import json, sys
        from pathlib import Path
        import datasets
        folder, cache = Path(sys.argv[1]), sys.argv[2]
        files = sorted(str(p) for p in (folder / "data").glob("*.parquet"))
        by_files = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=cache)
        by_card = datasets.load_dataset(str(folder), split="train", cache_dir=cache)
        messages, tools = by_files.features["messages"], by_files.features["tools"]
        print(json.dumps({
            "rows": by_files.to_list(),
            "messages_nested": isinstance(messages, datasets.List) and isinstance(messages.feature, dict),
            "tool_calls_nested": isinstance(messages.feature["tool_calls"], datasets.List),
            "tools_nested": isinstance(tools, datasets.List) and isinstance(tools.feature["function"], dict),
            "same_features": by_card.features == by_files.features,
            "card_rows": by_card.num_rows,
        }))
        """
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder), str(tmp_path / "cache")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _as_openai(row: dict) -> dict:
    """The OpenAI record a Parquet row holds: its nulls dropped and the tools' parameters parsed."""
    messages = []
    for message in row["messages"]:
        item = {"role": message["role"], "content": message["content"]}
        if message["tool_calls"] is not None:
            item["tool_calls"] = message["tool_calls"]
        if message["tool_call_id"] is not None:
            item["tool_call_id"] = message["tool_call_id"]
        messages.append(item)
    tools = [
        {"type": t["type"], "function": {**t["function"], "parameters": json.loads(t["function"]["parameters"])}}
        for t in row["tools"]
    ]
    return {"messages": messages, "tools": tools}


def test_datasets_reads_a_parquet_snapshot_with_nested_messages_and_tools_and_every_record_is_the_jsonl_one(
    eager, settings, tmp_path
):
    shop, air = domain_make(), domain_make("air")
    for i in range(4):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    refund = trajectory_make(air, messages=_refund_conversation())
    Trajectory.objects.filter(pk=refund.pk).update(tools=[*TOOLS, REFUND])
    trajectory_make(shop, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}])
    trajectory_make(shop, messages=ORPHAN_RESULT)  # refused by both formats

    parquet = _built("parquet", {}, {"shard_rows": 2})
    openai = _built("openai", {})

    folder = _folder(settings, parquet)
    loaded = _load_with_datasets(folder, tmp_path)
    assert loaded["messages_nested"] and loaded["tool_calls_nested"] and loaded["tools_nested"]
    assert loaded["same_features"] and loaded["card_rows"] == parquet.count == 6
    jsonl = [
        json.loads(line) for line in (_folder(settings, openai) / openai.files[0]["name"]).read_bytes().splitlines()
    ]
    assert [_as_openai(row) for row in loaded["rows"]] == jsonl
    manifest = [
        json.loads(line) for line in (folder / parquet.file_entry("manifest")["name"]).read_bytes().splitlines()
    ]
    assert [row["trajectory_id"] for row in loaded["rows"]] == [line["trajectory_id"] for line in manifest]
    refunded = next(row for row in loaded["rows"] if row["trajectory_id"] == refund.pk)
    assert refunded["domain"] == "air" and refunded["num_tool_calls"] == 2
    assert refunded["tool_names"] == ["get_order", "refund"] and refunded["num_turns"] == 3
    assert json.loads(refunded["tools"][1]["function"]["parameters"]) == REFUND["function"]["parameters"]
    assert parquet.refused_count == openai.refused_count == 1
    assert parquet.refusal_reasons == {"parquet: messages[].tool_call_id: no open call '…'": 1}


def test_shards_end_at_their_row_limit_and_their_checksums_cover_every_one(eager, settings, tmp_path):
    shop = domain_make()
    for i in range(5):
        trajectory_make(shop, messages=conversation(f"W{i}"))

    snapshot = _built("parquet", {}, {"shard_rows": 2})

    folder = _folder(settings, snapshot)
    shards = [entry for entry in snapshot.files if entry["kind"] == "data"]
    names = [f"data/train-0000{i}-of-00003.parquet" for i in range(3)]
    assert [entry["name"] for entry in shards] == names
    assert [pq.ParquetFile(folder / name).metadata.num_rows for name in names] == [2, 2, 1]
    for entry in shards:
        assert hashlib.sha256((folder / entry["name"]).read_bytes()).hexdigest() == entry["sha256"]
    listing = "".join(f"{entry['sha256']}  {entry['name']}\n" for entry in shards)  # `sha256sum data/*`
    assert snapshot.sha256 == hashlib.sha256(listing.encode()).hexdigest()
    assert snapshot.bytes == sum(entry["bytes"] for entry in shards)
    report = json.loads((folder / snapshot.file_entry("report")["name"]).read_text())
    assert report["data_sha256"] == snapshot.sha256
    assert {f["name"] for f in report["files"]} == {e["name"] for e in snapshot.files if e["kind"] != "report"}
    # Line n of the manifest is row n of the shards in name order, hashed as the row's compact JSON.
    rows = [row for name in names for row in pq.read_table(folder / name).to_pylist()]
    manifest = [
        json.loads(line) for line in (folder / snapshot.file_entry("manifest")["name"]).read_bytes().splitlines()
    ]
    assert [line["index"] for line in manifest] == list(range(5))
    for row, line in zip(rows, manifest, strict=True):
        assert row["trajectory_id"] == line["trajectory_id"]
        assert hashlib.sha256(orjson.dumps(row)).hexdigest() == line["sha256"]


@pytest.mark.django_db
def test_a_shard_ends_at_the_first_row_group_past_its_byte_limit(tmp_path, monkeypatch):
    shop = domain_make()
    for i in range(5):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    monkeypatch.setattr(parquet_writer, "ROW_GROUP_ROWS", 2)

    result = export_write(
        format="parquet", filters=export_filters_clean({}), path=tmp_path / "out", options=ExportOptions(shard_bytes=1)
    )

    counts = [pq.ParquetFile(tmp_path / "out" / f.name).metadata.num_rows for f in result.data_files]
    assert counts == [2, 2, 1]
    assert (tmp_path / "out" / "out.manifest.jsonl").is_file() and (tmp_path / "out" / "out.report.json").is_file()


@pytest.mark.django_db
def test_an_export_of_nothing_is_one_shard_with_the_columns_and_no_rows(tmp_path):
    result = export_write(format="parquet", filters=export_filters_clean({}), path=tmp_path / "empty")

    (shard,) = result.data_files
    assert shard.name == "data/train-00000-of-00001.parquet"
    table = pq.read_table(tmp_path / "empty" / shard.name)
    assert table.num_rows == 0 and table.schema.names[:6] == [
        "trajectory_id",
        "version",
        "domain",
        "kind",
        "status",
        "messages",
    ]
    with pytest.raises(ValueError, match="not an empty folder"):
        export_write(format="parquet", filters=export_filters_clean({}), path=tmp_path / "empty")


def _bulk(domain, n: int) -> None:
    Trajectory.objects.bulk_create(
        [
            Trajectory(
                kind=TrajectoryKind.ROLLOUT,
                status=TrajectoryStatus.ACCEPTED,
                domain=domain,
                messages=conversation(f"W{i}"),
                tools=TOOLS,
            )
            for i in range(n)
        ],
        batch_size=1000,
    )


def _peak(path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        result = export_write(format="parquet", filters=export_filters_clean({}), path=path)
        return result.stats.count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
def test_parquet_memory_stays_flat_as_rows_grow(tmp_path):
    shop = domain_make()
    _bulk(shop, 2000)
    small_count, small_peak = _peak(tmp_path / "small")
    _bulk(shop, 14000)
    large_count, large_peak = _peak(tmp_path / "large")
    assert (small_count, large_count) == (2000, 16000)
    # Eight times the rows, about the same Python peak (one row group of rows at a time) ...
    assert large_peak < small_peak * 1.5 + 512 * 1024, (small_peak, large_peak)
    assert large_peak < 32 * 1024 * 1024
    # ... and Arrow's own buffers (outside tracemalloc's view) stay at a row group's size too.
    assert pa.default_memory_pool().max_memory() < 64 * 1024 * 1024


# ---------------------------------------------------------------- the card


def _card(folder) -> tuple[dict, str]:
    text = (folder / "README.md").read_text()
    _, header, body = text.split("---\n", 2)
    return yaml.safe_load(header), body


def _table(body: str, heading: str) -> dict[str, list[str]]:
    """The Markdown table after `heading`, {first cell: other cells}."""
    section = body.split(heading + "\n", 1)[1]
    rows = {}
    for line in section.strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0]] = cells[1:]
    return rows


def _facts_world(users):
    """Two domains; judged and decided records (individually and in bulk), a rejected one, a record grown from a
    seed, LLM call rows cited by a provenance, and one record the gate refuses."""
    shop, air = domain_make(), domain_make("air")
    person = User.objects.get(username="curator")
    profile = EndpointProfile.objects.create(name="local", model="m-agent")
    calls = [
        LLMCall.objects.create(
            stage=stage,
            profile=profile,
            model=model,
            request_hash="h",
            prompt_version=version,
            request={},
            tokens_in=100,
            tokens_out=tokens_out,
        )
        for stage, model, version, tokens_out in (
            ("agent", "m-agent", "agent-v3", 20),
            ("simulator", "m-sim", "sim-v2", 30),
        )
    ]
    provenance = {
        "stage": "rollout",
        "models": {"agent": "m-agent", "simulator": "m-sim"},
        "profiles": {"agent": "local", "simulator": "local"},
        "prompt_versions": {"agent": "agent-v3"},
        "llm_calls": [c.pk for c in calls],
    }
    seed = Seed.objects.create(domain=shop, source_format="tau2", source_name="retail.json", source_record=3)
    records = []
    for i, (passed, decision) in enumerate([(True, "accept"), (True, "accept"), (False, "accept"), (True, "reject")]):
        status = TrajectoryStatus.REJECTED if decision == "reject" else TrajectoryStatus.ACCEPTED
        t = trajectory_make(
            shop, messages=conversation(f"W{i}"), status=status, provenance=provenance if i == 0 else {}
        )
        JudgeVerdict.objects.create(
            trajectory=t,
            passed=passed,
            score=0.8 if passed else 0.3,
            scores={"task_completed": 0.8 if passed else 0.2},
            trajectory_version=1,
            model="m-judge",
        )
        Review.objects.create(trajectory=t, reviewer=person, decision=decision, trajectory_version=1)
        records.append(t)
    grown = trajectory_make(
        air,
        messages=_refund_conversation(),
        seed=seed,
        kind=TrajectoryKind.AMPLIFIED,
        score=None,
        provenance={"stage": "amplify", "model": "m-amp", "profile": "local", "prompt_version": "amplify-v2"},
    )
    Trajectory.objects.filter(pk=grown.pk).update(tools=[*TOOLS, REFUND])
    Review.objects.create(trajectory=grown, reviewer=person, decision=Decision.ACCEPT, trajectory_version=1, bulk=True)
    trajectory_make(air, messages=ORPHAN_RESULT)
    rollups_rebuild()  # the rows above were written around the services
    return records, grown


@pytest.mark.parametrize("fmt", ["openai", "parquet", "sharegpt", "tau2"])
def test_the_card_numbers_are_the_snapshots(eager, settings, users, fmt):
    records, grown = _facts_world(users)

    snapshot = _built(fmt, {"status": "all"})

    folder = _folder(settings, snapshot)
    header, body = _card(folder)
    manifest = [
        json.loads(line) for line in (folder / snapshot.file_entry("manifest")["name"]).read_bytes().splitlines()
    ]
    exported = Trajectory.objects.in_bulk([line["trajectory_id"] for line in manifest])
    assert len(manifest) == snapshot.count == 5 and snapshot.refused_count == 1
    by_domain = {}
    for t in exported.values():
        by_domain[t.domain.name] = by_domain.get(t.domain.name, 0) + 1
    assert {name: int(cells[0]) for name, cells in _table(body, "### By domain").items()} == by_domain
    by_status = {"accepted": 4, "rejected": 1}
    assert {name: int(cells[0]) for name, cells in _table(body, "### By status").items()} == by_status
    apis = _table(body, "### APIs (tools) called")
    assert {name: (int(calls), int(recs)) for name, (calls, recs) in apis.items()} == {
        "get_order": (5, 5),
        "refund": (1, 1),
    }
    summary = {line.split(" | ")[0].strip("| "): line for line in body.splitlines() if line.startswith("| tool calls")}
    calls_written = sum(len(m.get("tool_calls") or []) for t in exported.values() for m in t.messages)
    assert summary["tool calls"].split(" | ")[1] == str(calls_written) == "6"
    assert "1 record matched the filters but failed the export gate" in body
    left_out = _table(body, "and are not in the data.")
    assert {reason.replace("\\|", "|"): int(n) for reason, (n,) in left_out.items()} == snapshot.refusal_reasons
    # Judge: 4 verdicts, 3 passed; against people (individual decisions only, the bulk one apart): 2 pass/accept,
    # 1 fail/accept, 1 pass/reject.
    assert "4 of 5 records carry a judge verdict; 3 passed (75.0%)" in body
    agreement = _table(body, "(bulk decisions are not counted): agreement 50.0%, Cohen's kappa -0.333.")
    assert agreement == {"judge pass": ["2", "1"], "judge fail": ["1", "0"]}
    assert "no per-criterion human ratings yet" in body
    assert "Near-duplicates removed: not measured" in body and "## Simulator fidelity\n\nNot measured" in body
    models = _table(body, "### Models")
    assert {name: int(cells[0]) for name, cells in models.items()} == {
        "judge: m-judge": 4,
        "agent: m-agent": 1,
        "simulator: m-sim": 1,
        "amplify: m-amp": 1,
    }
    assert set(_table(body, "### Prompt versions")) == {"agent: agent-v3", "amplify: amplify-v2"}
    calls = _table(body, "The 2 call rows the records cite (2 still stored):")
    assert calls["agent"] == ["m-agent", "local", "agent-v3", "1", "0", "100", "20"]
    assert "1 record grew from 1 seed." in body and "| tau2 retail.json #3 | 1 |" in body
    assert header["size_categories"] == ["n<1K"] and header["license"] == "unknown"
    assert "tool-calling" in header["tags"] and header["task_categories"] == ["text-generation"]
    assert ("configs" in header) == (fmt == "parquet")
    for image in ("images/turns.png", "images/tool_calls.png", "images/characters.png"):
        assert f"]({image})" in body and (folder / image).read_bytes().startswith(b"\x89PNG")


def test_the_card_counts_tokens_with_a_configured_tokenizer(eager, settings, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "order": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    settings.DATASET_CARD_TOKENIZER = str(tmp_path / "tokenizer.json")
    shop = domain_make()
    trajectory_make(
        shop,
        messages=[{"role": "user", "content": "where is my order"}, {"role": "assistant", "content": "on its way"}],
    )

    snapshot = _built("openai", {})

    _, body = _card(_folder(settings, snapshot))
    assert "Length is in tokens: counted with the tokenizer tokenizer.json" in body
    assert re.search(r"\| tokens \| 7 \| 7\.0 \| 7 \|", body)  # where is my order / on its way: 7 words
    assert (_folder(settings, snapshot) / "images/tokens.png").is_file()


def test_an_unreadable_tokenizer_is_named_in_the_card_which_counts_characters(eager, settings, tmp_path):
    settings.DATASET_CARD_TOKENIZER = str(tmp_path / "missing.json")
    trajectory_make(domain_make())

    snapshot = _built("openai", {})

    _, body = _card(_folder(settings, snapshot))
    assert f"Length is in characters: the tokenizer {tmp_path / 'missing.json'} could not be read" in body


def test_text_from_the_data_cannot_break_the_cards_tables_or_markup(eager, settings):
    shop = domain_make("shop | <script>alert(1)</script>")
    trajectory_make(shop)

    snapshot = _built("openai", {})

    _, body = _card(_folder(settings, snapshot))
    assert "<script>" not in body
    assert _table(body, "### By domain") == {"shop \\| &lt;script&gt;alert(1)&lt;/script&gt;": ["1", "100.0%"]}


# ---------------------------------------------------------------- the Hub


def test_push_to_hub_without_a_token_is_skipped_and_says_why(eager, settings, client_for):
    trajectory_make(domain_make())

    snapshot = _built("parquet", {}, {"push_to_hub": True, "hub_repo": "team/simia"})

    assert snapshot.hub["status"] == "skipped" and snapshot.hub["detail"] == "not pushed: HF_TOKEN is not set"
    body = client_for("annotator").get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    assert body["hub"]["status"] == "skipped" and body["options"] == {"push_to_hub": True, "hub_repo": "team/simia"}
    assert "not pushed: HF_TOKEN is not set" in client_for("annotator").get(f"/exports/{snapshot.pk}/").content.decode()


def test_push_to_an_unreachable_hub_fails_the_publish_step_not_the_snapshot(eager, settings):
    settings.HF_TOKEN, settings.HF_ENDPOINT = "hf_test", "http://127.0.0.1:16799"  # nothing listens there
    trajectory_make(domain_make())

    snapshot = snapshot_create(format="openai", filters={}, options={"push_to_hub": True, "hub_repo": "team/simia"})
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()

    assert snapshot.is_built and snapshot.count == 1
    assert (
        snapshot.hub["status"] == "failed" and "http://127.0.0.1:16799 could not be reached" in snapshot.hub["detail"]
    )
    publish = snapshot.job.units.get(stage="publish")
    assert publish.result["hub"] == "failed" and "could not be reached" in publish.result["error"]


@pytest.mark.django_db
def test_the_export_command_writes_a_parquet_folder_with_its_card_and_says_when_it_cannot_push(tmp_path, settings):
    settings.HF_TOKEN = ""
    trajectory_make(domain_make())
    out = []

    call_command(
        "export",
        "--format",
        "parquet",
        "--output",
        str(tmp_path / "ds"),
        "--card",
        "--push-to-hub",
        "team/simia",
        stdout=_Lines(out),
    )

    assert (tmp_path / "ds" / "data" / "train-00000-of-00001.parquet").is_file()
    assert (tmp_path / "ds" / "README.md").is_file() and (tmp_path / "ds" / "images" / "turns.png").is_file()
    assert "Hugging Face Hub: skipped: not pushed: HF_TOKEN is not set" in "".join(out)


class _Lines:
    def __init__(self, sink: list):
        self.sink = sink

    def write(self, text: str) -> None:
        self.sink.append(text)


# ---------------------------------------------------------------- the API


def test_the_api_takes_options_refuses_bad_ones_and_serves_every_file_by_name(eager, settings, client_for):
    for i in range(3):
        trajectory_make(domain_make(), messages=conversation(f"W{i}"))
    client = client_for("curator")

    bad = client.post(
        "/api/v1/snapshots/", {"format": "parquet", "options": {"shard_rows": 0}}, content_type="application/json"
    )
    assert bad.status_code == 400
    made = client.post(
        "/api/v1/snapshots/", {"format": "parquet", "options": {"shard_rows": 2}}, content_type="application/json"
    )
    assert made.status_code == 202, made.content
    body = client.get(f"/api/v1/snapshots/{made.json()['id']}/").json()
    assert body["download_url"] is None and body["options"] == {"shard_rows": 2}
    data = [f for f in body["files"] if f["kind"] == "data"]
    assert [f["name"] for f in data] == ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"]
    for entry in body["files"]:
        response = client.get(entry["download_url"])
        assert response.status_code == 200, entry
        assert hashlib.sha256(b"".join(response.streaming_content)).hexdigest() == entry["sha256"]
    assert "name=data/train-00000-of-00002.parquet" in data[0]["download_url"]
    several = client.get(f"/api/v1/snapshots/{body['id']}/download/")
    assert several.status_code == 400 and "2 data files" in several.json()["detail"]
    missing = client.get(f"/api/v1/snapshots/{body['id']}/download/", {"name": "../../settings.py"})
    assert missing.status_code == 404
    card = client.get(f"/api/v1/snapshots/{body['id']}/download/", {"file": "card"})
    assert card["Content-Type"].startswith("text/markdown")
