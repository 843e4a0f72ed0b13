"""Seed and τ² imports: real samples, malformed files refused with file/line/field, no duplicates."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from simia_web.catalog.importers import ImportRejected, seeds_import
from simia_web.catalog.models import Api, Domain, Seed, Task
from simia_web.core.models import Revision

# The shared sample data sits beside the checkout (or beside the folder of worktrees).
_SAMPLES = [p / "shared" / "data" / "tau2" for p in Path(__file__).resolve().parents]
TAU2 = next((p for p in _SAMPLES if p.is_dir()), _SAMPLES[3])
needs_tau2 = pytest.mark.skipif(not TAU2.is_dir(), reason=f"τ² sample data not found at {TAU2}")

TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look up an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
}


def openai_record(n: int) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"Where is order W{n}?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": json.dumps({"order_id": f"W{n}"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
            {"role": "assistant", "content": f"Order W{n} has shipped."},
        ],
        "tools": [TOOL],
    }


def sharegpt_record(n: int) -> dict:
    return {
        "conversations": [
            {"from": "human", "value": f"Where is order W{n}?"},
            {"from": "function_call", "value": json.dumps({"name": "get_order", "arguments": {"order_id": f"W{n}"}})},
            {"from": "observation", "value": '{"status": "shipped"}'},
            {"from": "gpt", "value": f"Order W{n} has shipped."},
        ],
        "system": "You are a retail agent.",
        "tools": json.dumps([TOOL["function"]]),
    }


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def counts():
    return (
        Domain.objects.count(),
        Api.objects.count(),
        Task.objects.count(),
        Seed.objects.count(),
        Revision.objects.count(),
    )


@needs_tau2
def test_tau2_retail_and_airline(db):
    result = seeds_import(source=TAU2 / "retail", format="tau2")
    assert result.domain == "retail" and result.created == {"apis": 16, "tasks": 114, "seeds": 0}
    retail = Domain.objects.get(name="retail")
    assert "retail" in retail.policy.lower() and set(retail.initial_state) == {"users", "orders", "products"}
    assert retail.state_schema["required"] == ["products", "users", "orders"]
    assert Api.objects.get(domain=retail, name="cancel_pending_order").kind == "write"
    assert Api.objects.get(domain=retail, name="get_order_details").kind == "read"
    task = Task.objects.get(domain=retail, external_id="0")
    assert task.instruction.startswith("Reason for call: You received your order #W2378156")
    assert "Known info: You are Yusuf Rossi" in task.instruction
    assert task.expected_actions[-1]["name"] == "exchange_delivered_order_items"
    assert task.apis_needed[0] == "find_user_id_by_name_zip"
    assert task.user_scenario["instructions"]["known_info"]
    task_type = ContentType.objects.get_for_model(Task)
    assert Revision.objects.filter(content_type=task_type, object_id=task.pk, version=1).exists()

    airline = seeds_import(source=TAU2 / "airline", format="tau2")
    assert airline.created == {"apis": 14, "tasks": 50, "seeds": 0}
    assert Domain.objects.get(name="airline").initial_state == {}
    assert Task.objects.get(domain__name="airline", external_id="0").expected_outcome.startswith("Agent should refuse")

    before = counts()
    again = seeds_import(source=TAU2 / "airline", format="tau2")
    assert again.created == {"apis": 0, "tasks": 0, "seeds": 0} and again.skipped["tasks"] == 50
    assert counts()[:4] == before[:4]


@needs_tau2
def test_tau2_zip_upload(db):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in ("policy.md", "tools.json", "tasks.json"):
            archive.write(TAU2 / "airline" / name, f"airline/{name}")
    upload = SimpleUploadedFile("airline.zip", buffer.getvalue())
    result = seeds_import(source=upload, format="tau2")
    assert result.domain == "airline" and result.created["tasks"] == 50


@pytest.mark.parametrize(("format", "make"), [("openai", openai_record), ("sharegpt", sharegpt_record)])
def test_seed_files_import_once(db, tmp_path, format, make):
    path = tmp_path / "orders.jsonl"
    path.write_text(jsonl([make(1), make(2), make(1)]))
    result = seeds_import(source=path, format=format, domain="shop")
    assert result.created == {"apis": 1, "tasks": 0, "seeds": 2} and result.skipped["seeds"] == 1
    seed = Seed.objects.filter(domain__name="shop").first()
    assert seed.usable, seed.problems
    assert seed.tools[0]["function"]["name"] == "get_order"
    assert Api.objects.get(domain__name="shop").name == "get_order"
    before = counts()
    again = seeds_import(source=path, format=format, domain="shop")
    assert again.created == {"apis": 0, "tasks": 0, "seeds": 0} and again.skipped == {"apis": 0, "tasks": 0, "seeds": 3}
    assert counts() == before


def test_json_array_upload_and_unusable_seed(db):
    broken = openai_record(3)
    broken["messages"] = broken["messages"][:2]  # a call without its result
    body = json.dumps([openai_record(1), broken], indent=2).encode()
    result = seeds_import(source=SimpleUploadedFile("seeds.json", body), format="openai")
    assert result.domain == "seeds" and result.created["seeds"] == 2 and result.unusable_seeds == 1
    bad = Seed.objects.get(usable=False)
    assert {p["code"] for p in bad.problems} >= {"call_without_result"}
    assert bad.source_record == 2


MALFORMED = {
    "empty.jsonl": (b"", None, "", "empty"),
    "binary.jsonl": (b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", None, "", "binary"),
    "latin1.jsonl": ('{"messages": "caf\u00e9"}\n'.encode("latin-1"), 1, "", "not UTF-8"),
    "truncated.json": (b'[\n  {"messages": [\n    {"role": "user", "content": "hi"', 3, "", "truncated"),
    "missing_field.jsonl": (
        (jsonl([openai_record(1), openai_record(2)]) + json.dumps({"tools": [TOOL]}) + "\n").encode(),
        3,
        "messages",
        "missing",
    ),
    "bad_role.jsonl": (
        (jsonl([openai_record(1)]) + json.dumps({"messages": [{"role": "robot", "content": "x"}]}) + "\n").encode(),
        2,
        "messages[0].role",
        "must be one of",
    ),
}


@pytest.mark.parametrize("filename", sorted(MALFORMED))
def test_malformed_files_are_refused(db, tmp_path, filename):
    body, line, field, words = MALFORMED[filename]
    path = tmp_path / filename
    path.write_bytes(body)
    before = counts()
    with pytest.raises(ImportRejected) as caught:
        seeds_import(source=path, format="openai", domain="shop")
    issue = caught.value.errors[0]
    assert issue.file == str(path) and issue.line == line and issue.field == field
    assert words in issue.message
    assert str(path) in str(caught.value) and "nothing was written" in str(caught.value)
    assert counts() == before


def test_oversized_files_are_refused(db, tmp_path, settings):
    path = tmp_path / "big.jsonl"
    path.write_text(jsonl([openai_record(n) for n in range(5)]))
    settings.SIMIA_IMPORT_MAX_BYTES = 100
    with pytest.raises(ImportRejected, match="limit is 100"):
        seeds_import(source=path, format="openai")
    settings.SIMIA_IMPORT_MAX_BYTES = 10**6
    settings.SIMIA_IMPORT_MAX_RECORDS = 3
    with pytest.raises(ImportRejected, match="more than 3 records"):
        seeds_import(source=path, format="openai")
    assert counts() == (0, 0, 0, 0, 0)


def test_sharegpt_bad_record_names_line_and_field(db, tmp_path):
    bad = sharegpt_record(3)
    bad["conversations"][1]["value"] = "{not json"
    path = tmp_path / "apigen.json"
    path.write_text(json.dumps([sharegpt_record(1), sharegpt_record(2), bad], indent=1))
    with pytest.raises(ImportRejected) as caught:
        seeds_import(source=path, format="sharegpt")
    issue = caught.value.errors[0]
    assert issue.record == 3 and issue.field == "conversations[1].value" and issue.line > 3
    assert counts() == (0, 0, 0, 0, 0)


def test_many_errors_are_capped_at_twenty(db, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(jsonl([{"nope": n} for n in range(30)]))
    with pytest.raises(ImportRejected) as caught:
        seeds_import(source=path, format="openai")
    assert len(caught.value.errors) == 20 and caught.value.total == 30
    assert "showing the first 20" in str(caught.value)


def test_tau2_folder_problems(db, tmp_path):
    (tmp_path / "policy.md").write_text("Be nice.")
    (tmp_path / "tools.json").write_text(json.dumps([TOOL]))
    (tmp_path / "tasks.json").write_text(
        json.dumps(
            [
                {
                    "id": "1",
                    "user_scenario": {"instructions": "Find W1."},
                    "evaluation_criteria": {"actions": [{"name": "teleport"}]},
                }
            ]
        )
    )
    with pytest.raises(ImportRejected) as caught:
        seeds_import(source=tmp_path, format="tau2", domain="shop")
    issue = caught.value.errors[0]
    assert issue.file.endswith("tasks.json") and issue.field == "evaluation_criteria.actions[0].name"
    assert counts() == (0, 0, 0, 0, 0)
    (tmp_path / "tasks.json").unlink()
    with pytest.raises(ImportRejected, match="tasks.json: is missing"):
        seeds_import(source=tmp_path, format="tau2", domain="shop")


def test_command_prints_counts_or_errors(db, tmp_path, capsys):
    path = tmp_path / "seeds.jsonl"
    path.write_text(jsonl([openai_record(1)]))
    call_command("import_seeds", str(path), "--format", "openai", "--domain", "shop")
    assert "seeds: 1 created" in capsys.readouterr().out
    path.write_bytes(b"\x00\x01")
    with pytest.raises(CommandError, match="binary"):
        call_command("import_seeds", str(path), "--format", "openai")
    with pytest.raises(CommandError, match="seeds.jsonl: a seed file needs --format"):
        call_command("import_seeds", str(path))


def test_command_reads_a_folder_as_a_tau2_domain(db, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match="is missing"):  # read as τ²: its files are named
        call_command("import_seeds", str(tmp_path / "empty"))
