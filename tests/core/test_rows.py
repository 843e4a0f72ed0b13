"""core.rows: the unit write path's inserts and reads write and read what the ORM would, in one statement each."""

import pytest
from django.db.models.signals import post_save

from simia_web.catalog.models import Task
from simia_web.catalog.services import domain_ensure
from simia_web.core.rows import row_by_pk, rows_insert
from simia_web.curation.models import Trajectory
from simia_web.llm.models import EndpointProfile, LLMCall
from tests.support.factories import TOOLS, conversation

pytestmark = pytest.mark.django_db

# Set by the database or the clock: they differ between two rows written one after the other.
_OWN = {"id", "created_at", "updated_at"}


def _trajectory(domain, text):
    return Trajectory(
        kind="rollout",
        domain=domain,
        status="judged_pass",
        messages=conversation(text),
        tools=TOOLS,
        steps={"3": {"patch": [], "state_after": {"n": 1}}},
        judge_passed=True,
        judge_score=0.75,
        provenance={"llm_calls": [1, 2], "model": "stub"},
        preview=text,
        turns=3,
    )


def _stored(model, pk):
    fields = [f.attname for f in model._meta.concrete_fields if f.attname not in _OWN]
    return model.objects.filter(pk=pk).values(*fields).get()


def test_an_inserted_trajectory_is_the_row_save_writes(django_assert_num_queries):
    domain = domain_ensure(name="shop")
    saved = _trajectory(domain, "Cancel W1.")
    saved.save()
    inserted = _trajectory(domain, "Cancel W1.")
    with django_assert_num_queries(1):
        assert rows_insert([inserted]) == [inserted]
    assert inserted.pk is not None and inserted.pk != saved.pk
    assert _stored(Trajectory, inserted.pk) == _stored(Trajectory, saved.pk)
    # What the database sets comes back as with save(): the generated priority, and auto_now fields set before.
    saved.refresh_from_db()
    assert inserted.priority == saved.priority and inserted.created_at is not None
    assert not inserted._state.adding and inserted._state.db == "default"
    inserted.preview = "edited"
    inserted.save(update_fields=["preview"])  # an update of the row, not a second insert
    assert Trajectory.objects.count() == 2 and Trajectory.objects.get(pk=inserted.pk).preview == "edited"


def test_several_rows_are_one_statement_and_keep_their_order(django_assert_num_queries):
    calls = [
        LLMCall(stage="agent", model="m", request_hash=f"h{i}", request={"messages": [{"n": i}]}, response={"i": i})
        for i in range(5)
    ]
    with django_assert_num_queries(1):
        rows_insert(calls)
    assert [call.pk for call in calls] == sorted(call.pk for call in calls)
    for i, call in enumerate(calls):
        stored = LLMCall.objects.get(pk=call.pk)
        assert (stored.request_hash, stored.request, stored.response) == (f"h{i}", {"messages": [{"n": i}]}, {"i": i})
    assert rows_insert([]) == []


def test_a_model_with_save_receivers_is_saved_so_they_hear_of_it():
    heard = []

    def receiver(sender, instance, created, **kwargs):
        heard.append((instance.name, created))

    post_save.connect(receiver, sender=EndpointProfile)
    try:
        profile = EndpointProfile(name="p1", base_url="http://127.0.0.1:9/v1", model="m")
        rows_insert([profile])
    finally:
        post_save.disconnect(receiver, sender=EndpointProfile)
    assert heard == [("p1", True)] and profile.pk is not None


def test_a_row_read_by_primary_key_loads_only_the_fields_asked_for(django_assert_num_queries):
    domain = domain_ensure(name="shop")
    task = Task.objects.create(
        domain=domain, instruction="Cancel W1.", expected_outcome="W1 cancelled", user_scenario={"persona": "calm"}
    )
    with django_assert_num_queries(1):
        read = row_by_pk(Task, task.pk, ("domain_id", "instruction", "user_scenario"))
    assert (read.pk, read.domain_id, read.instruction, read.user_scenario) == (
        task.pk,
        domain.pk,
        "Cancel W1.",
        {"persona": "calm"},
    )
    assert "expected_outcome" in read.get_deferred_fields()
    assert read.expected_outcome == "W1 cancelled"  # loaded when asked for, as with .only()
    with pytest.raises(Task.DoesNotExist):
        row_by_pk(Task, task.pk + 1000, ("instruction",))
