"""Every exported record passes its format's rules; broken rows are repaired or refused, never silent."""

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from simia_web.curation.models import TrajectoryStatus
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write
from simia_web.formats.openai import openai_problems
from simia_web.formats.sharegpt import sharegpt_problems, sharegpt_repair
from simia_web.formats.tau2 import tau2_simulation_problems, tau2_task_problems

from .data import conversation, domain_make, task_make, trajectory_make

pytestmark = pytest.mark.django_db

ORPHAN_RESULT = [
    {"role": "user", "content": "hi"},
    {"role": "tool", "tool_call_id": "nope", "content": "{}"},
    {"role": "assistant", "content": "hello"},
]
ENDS_WITH_USER = [*conversation(), {"role": "user", "content": "thanks"}]


def _sharegpt_rows(path) -> tuple[list[dict], dict]:
    with zipfile.ZipFile(path) as archive:
        rows = [json.loads(line) for line in archive.read("data.jsonl").splitlines()]
        info = json.loads(archive.read("dataset_info.json"))
    return rows, info


def test_openai_export_records_pass_the_rules_and_broken_rows_are_refused(tmp_path):
    shop = domain_make()
    good = [trajectory_make(shop, messages=conversation(f"W{i}")) for i in range(3)]
    bad = trajectory_make(shop, messages=ORPHAN_RESULT)
    trajectory_make(shop, status=TrajectoryStatus.JUDGED_PASS)  # not accepted: left out by default

    result = export_write(format="openai", filters=export_filters_clean({}), path=tmp_path / "out.jsonl")

    lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert len(lines) == result.stats.count == len(good)
    for line in lines:
        record = json.loads(line)
        assert openai_problems(record) == []
        call = record["messages"][2]["tool_calls"][0]
        assert isinstance(call["function"]["arguments"], str)
        assert record["messages"][3]["tool_call_id"] == call["id"]
    assert result.stats.refused_count == 1
    assert result.stats.refusals[0]["trajectory"] == bad.pk
    assert any("no open call" in r for r in result.stats.refusals[0]["reasons"])
    import hashlib

    assert hashlib.sha256((tmp_path / "out.jsonl").read_bytes()).hexdigest() == result.sha256
    assert result.bytes == (tmp_path / "out.jsonl").stat().st_size


def test_sharegpt_export_passes_llama_factory_rules_with_repairs_and_refusals(tmp_path):
    shop = domain_make()
    trajectory_make(shop)
    repaired = trajectory_make(shop, messages=conversation("W2", extra_assistant=True))
    refused = trajectory_make(shop, messages=ENDS_WITH_USER)

    result = export_write(format="sharegpt", filters=export_filters_clean({}), path=tmp_path / "out.zip")

    rows, info = _sharegpt_rows(tmp_path / "out.zip")
    assert len(rows) == result.stats.count == 2
    for row in rows:
        assert sharegpt_problems(row) == []
        tags = [turn["from"] for turn in row["conversations"]]
        assert len(tags) % 2 == 0
        assert all(t in ("human", "observation") for t in tags[0::2])
        assert all(t in ("gpt", "function_call") for t in tags[1::2])
        assert isinstance(row["tools"], str) and json.loads(row["tools"])[0]["function"]["name"] == "get_order"
        assert row["system"] == "You are a shop assistant."
    merged = rows[1]["conversations"][-1]["value"]
    assert merged == "Order W2 has shipped.\n\nAnything else?", repaired.pk
    assert result.stats.repaired_count == 1
    assert [r["trajectory"] for r in result.stats.refusals] == [refused.pk]
    assert any("even number" in r for r in result.stats.refusals[0]["reasons"])
    (dataset,) = info.values()
    assert dataset["file_name"] == "data.jsonl" and dataset["formatting"] == "sharegpt"
    assert dataset["tags"]["function_tag"] == "function_call"


def test_sharegpt_repair_merges_only_text_turns():
    record = {
        "conversations": [
            {"from": "human", "value": "a"},
            {"from": "human", "value": "b"},
            {"from": "gpt", "value": "c"},
        ]
    }
    fixed, repairs = sharegpt_repair(record)
    assert [t["value"] for t in fixed["conversations"]] == ["a\n\nb", "c"]
    assert repairs and record["conversations"][0]["value"] == "a"  # input untouched


def test_tau2_export_has_tasks_and_simulations_in_tau2_layout(tmp_path):
    shop = domain_make()
    task = task_make(shop, external_id="7")
    with_task = trajectory_make(shop, task=task)
    seedless = trajectory_make(shop)

    result = export_write(format="tau2", filters=export_filters_clean({}), path=tmp_path / "out.json")

    document = json.loads((tmp_path / "out.json").read_text())
    assert result.stats.count == 2
    task_ids = {t["id"] for t in document["tasks"]}
    assert task_ids == {"shop/7", f"shop/trajectory-{seedless.pk}"}
    for record in document["tasks"]:
        assert tau2_task_problems(record) == []
    by_id = {s["id"]: s for s in document["simulations"]}
    simulation = by_id[f"simia-{with_task.pk}"]
    assert tau2_simulation_problems(simulation) == []
    assert simulation["task_id"] == "shop/7"
    assert simulation["termination_reason"] == "agent_stop"
    assert simulation["reward_info"]["reward"] == pytest.approx(0.9)
    call = simulation["messages"][2]["tool_calls"][0]
    assert call == {"id": "call_1", "name": "get_order", "arguments": {"order_id": "W1"}, "requestor": "assistant"}
    assert simulation["messages"][3]["id"] == "call_1" and simulation["messages"][3]["role"] == "tool"
    (action,) = next(t for t in document["tasks"] if t["id"] == "shop/7")["evaluation_criteria"]["actions"]
    assert action["name"] == "get_order"


def test_filters_select_rows(tmp_path):
    shop, bank = domain_make("shop"), domain_make("bank")
    trajectory_make(shop, status=TrajectoryStatus.JUDGED_PASS)
    trajectory_make(shop, status=TrajectoryStatus.ACCEPTED)
    trajectory_make(bank, status=TrajectoryStatus.ACCEPTED)

    def count(filters):
        return export_write(format="openai", filters=export_filters_clean(filters), path=tmp_path / "x").stats.count

    assert count({}) == 2
    assert count({"status": "all"}) == 3
    assert count({"status": ["accepted", "judged_pass"], "domain": "shop"}) == 2
    assert count({"status": "all", "domain": "bank"}) == 1


def test_bad_filters_are_refused():
    from simia_web.core.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="Unknown status"):
        export_filters_clean({"status": "bogus"})
    with pytest.raises(ValidationFailed, match="unknown filter"):
        export_filters_clean({"colour": "red"})


def test_export_command_writes_the_file(tmp_path):
    shop = domain_make()
    trajectory_make(shop)
    trajectory_make(shop, status=TrajectoryStatus.REJECTED)
    out = io.StringIO()
    call_command(
        "export",
        "--format",
        "openai",
        "--status",
        "all",
        "--domain",
        "shop",
        "--output",
        str(tmp_path / "all.jsonl"),
        stdout=out,
    )
    assert "wrote 2 records" in out.getvalue()
    assert len((tmp_path / "all.jsonl").read_bytes().splitlines()) == 2
    call_command("export", "--format", "sharegpt", "--output", str(tmp_path / "d.zip"), stdout=out)
    assert _sharegpt_rows(tmp_path / "d.zip")[0].__len__() == 1


def test_tau2_simulation_rules_catch_broken_records():
    from simia_web.formats.tau2 import tau2_simulation

    shop = domain_make()
    row = {
        "id": 1,
        "messages": conversation(),
        "steps": {},
        "created_at": None,
        "judge_score": 0.5,
        "reward": None,
        "termination_reason": "final_answer",
        "status": "accepted",
        "judge_passed": True,
    }
    record = tau2_simulation(row, "shop/1", shop.name)
    assert tau2_simulation_problems(record) == []
    record["messages"][3]["id"] = "call_unknown"
    record["messages"][2]["tool_calls"][0]["arguments"] = "{}"
    del record["trial"]
    assert tau2_simulation_problems(record) == ["trial: is missing"]
    record["trial"] = 0
    problems = tau2_simulation_problems(record)
    assert any("arguments: must be an object" in p for p in problems)
    assert any("no earlier tool call" in p for p in problems)
