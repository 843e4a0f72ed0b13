"""Edits of seeds, APIs and tasks: revisions with diffs, version conflicts, validation."""

import pytest
from django.contrib.contenttypes.models import ContentType

from simia_web.catalog.models import Api, Seed, Task, TaskStatus
from simia_web.catalog.services import api_update, domain_ensure, revision_initial, seed_update, task_update
from simia_web.core.errors import ValidationFailed
from simia_web.core.models import AuditEvent, Revision
from simia_web.core.services import VersionConflict

PARAMS = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
TOOLS = [{"type": "function", "function": {"name": "get_order", "description": "", "parameters": PARAMS}}]
MESSAGES = [
    {"role": "user", "content": "Where is W1?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W1"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
    {"role": "assistant", "content": "It has shipped."},
]


@pytest.fixture
def domain(db):
    return domain_ensure(name="shop")


def revisions(obj):
    content_type = ContentType.objects.get_for_model(obj)
    return list(Revision.objects.filter(content_type=content_type, object_id=obj.pk).order_by("version"))


def test_seed_update_writes_revision_with_diff(domain, users):
    seed = Seed.objects.create(domain=domain, source_format="openai", messages=MESSAGES, tools=TOOLS, content_hash="x")
    revision_initial(obj=seed)
    edited = [dict(m) for m in MESSAGES]
    edited[3] = {"role": "assistant", "content": "Your order W1 has shipped."}
    seed = seed_update(seed=seed, expected_version=1, actor=users["annotator"], messages=edited, note="clearer")
    assert seed.version == 2 and seed.messages[3]["content"] == "Your order W1 has shipped."
    assert seed.usable and seed.problems == []
    first, second = revisions(seed)
    assert second.author == users["annotator"] and second.note == "clearer"
    assert second.changes == [{"op": "replace", "path": "/messages/3/content", "value": "Your order W1 has shipped."}]
    assert AuditEvent.objects.filter(action="seed.update", target_id=str(seed.pk)).exists()
    with pytest.raises(VersionConflict):
        seed_update(seed=seed, expected_version=1, actor=users["annotator"], messages=MESSAGES)
    with pytest.raises(ValidationFailed):
        seed_update(seed=seed, expected_version=2, actor=users["annotator"], messages=[{"role": "robot"}])
    # Rule findings do not refuse the edit: the seed becomes unusable, with its reasons.
    seed = seed_update(seed=seed, expected_version=2, actor=None, messages=MESSAGES[:2])
    assert not seed.usable and "call_without_result" in {p["code"] for p in seed.problems}
    assert len(revisions(seed)) == 3


def test_api_update(domain, users):
    api = Api.objects.create(domain=domain, name="get_order", parameters=PARAMS)
    api = api_update(api=api, expected_version=1, actor=users["curator"], description="Look up an order.", kind="read")
    assert api.version == 2 and api.description == "Look up an order."
    base, edit = revisions(api)  # the pre-edit state was recorded as the base
    assert base.version == 1 and edit.changes == [
        {"op": "replace", "path": "/description", "value": "Look up an order."}
    ]
    with pytest.raises(VersionConflict):
        api_update(api=api, expected_version=1, actor=None, description="again")
    with pytest.raises(ValidationFailed):
        api_update(api=api, expected_version=2, actor=None, parameters={"type": "object", "required": ["x"]})
    with pytest.raises(ValidationFailed):
        api_update(api=api, expected_version=2, actor=None, parameters={"type": 12})
    assert Api.objects.get(pk=api.pk).version == 2


def test_task_update(domain, users):
    Api.objects.create(domain=domain, name="get_order", parameters=PARAMS)
    task = Task.objects.create(
        domain=domain, instruction="Check W1", apis_needed=["teleport"], status=TaskStatus.REJECTED, errors=["x"]
    )
    task = task_update(task=task, expected_version=1, actor=users["curator"], apis_needed=["get_order"])
    assert task.status == TaskStatus.VALID and task.errors == [] and task.version == 2
    assert revisions(task)[-1].changes == [{"op": "replace", "path": "/apis_needed/0", "value": "get_order"}]
    with pytest.raises(VersionConflict):
        task_update(task=task, expected_version=1, actor=None, instruction="other")
    with pytest.raises(ValidationFailed):
        task_update(task=task, expected_version=2, actor=None, instruction="  ")
    with pytest.raises(ValidationFailed):
        task_update(task=task, expected_version=2, actor=None, apis_needed=["teleport"])
