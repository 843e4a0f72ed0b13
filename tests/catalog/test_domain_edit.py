"""Editing a domain on its page: revisions with diffs, version conflicts, validation, roles."""

import json

import pytest
from django.contrib.contenttypes.models import ContentType

from simia_web.catalog.models import Domain
from simia_web.catalog.services import domain_update
from simia_web.core.models import AuditEvent, Revision
from simia_web.core.services import VersionConflict, versioned_update

SCHEMA = {
    "type": "object",
    "properties": {"orders": {"type": "object", "additionalProperties": {"type": "string"}}},
    "required": ["orders"],
}
STATE = {"orders": {"W1": "pending"}}


@pytest.fixture
def domain(db):
    return Domain.objects.create(
        name="shop",
        description="A shop",
        policy="Be polite.",
        state_schema=SCHEMA,
        initial_state=STATE,
        state_errors=["initial state breaks the state schema at (root): old", "no valid read-only API"],
    )


def form(domain, **changes) -> dict:
    data = {
        "version": domain.version,
        "description": domain.description,
        "policy": domain.policy,
        "state_schema": json.dumps(domain.state_schema),
        "initial_state": json.dumps(domain.initial_state),
        "note": "",
    }
    return {**data, **changes}


def revisions(obj) -> list[Revision]:
    content_type = ContentType.objects.get_for_model(obj)
    return list(Revision.objects.filter(content_type=content_type, object_id=obj.pk).order_by("version"))


def test_domain_edit_writes_a_revision_with_diff(client_for, domain):
    client = client_for("curator")
    new_state = {"orders": {"W1": "pending", "W2": "shipped"}}
    response = client.post(
        f"/domains/{domain.name}/",
        form(domain, policy="Be polite. Never refund twice.", initial_state=json.dumps(new_state), note="add W2"),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    domain.refresh_from_db()
    assert domain.version == 2 and domain.initial_state == new_state and "refund twice" in domain.policy
    assert domain.state_errors == ["no valid read-only API"]  # the state's old problem is gone, the API set's kept
    base, edit = revisions(domain)
    assert (base.version, edit.version) == (1, 2) and edit.note == "add W2"
    assert {"op": "add", "path": "/initial_state/orders/W2", "value": "shipped"} in edit.changes
    assert AuditEvent.objects.filter(action="domain.update", target_id=str(domain.pk)).exists()
    body = client.get(f"/domains/{domain.name}/").content.decode()
    assert "add W2" in body and 'class="add">+' in body and "Edit (version 2)" in body


def test_stale_version_is_a_conflict_and_overwrites_nothing(client_for, domain):
    versioned_update(obj=domain, expected_version=1, fields={"description": "Their edit"})
    response = client_for("curator").post(f"/domains/{domain.name}/", form(domain, version=1, description="My edit"))
    body = response.content.decode()
    assert response.status_code == 409 and "someone else changed this" in body and "now version 2" in body
    assert "My edit" in body  # the user's text is kept in the form
    domain.refresh_from_db()
    assert domain.description == "Their edit" and domain.version == 2
    assert revisions(domain) == []


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("state_schema", '{"type": "banana"}', "state schema is not a valid JSON Schema"),
        ("initial_state", '{"orders": {"W1": 7}}', "initial state breaks the state schema at orders/W1"),
        ("initial_state", '["W1"]', "must be a JSON object"),
        ("initial_state", "{not json", "Enter a valid JSON"),
    ],
)
def test_invalid_state_is_a_form_error(client_for, domain, field, value, message):
    response = client_for("curator").post(f"/domains/{domain.name}/", form(domain, **{field: value}))
    body = response.content.decode()
    assert response.status_code == 200 and "errorlist" in body and message in body
    domain.refresh_from_db()
    assert domain.version == 1 and domain.initial_state == STATE and revisions(domain) == []


def test_annotator_sees_no_form_and_cannot_edit(client_for, domain):
    client = client_for("annotator")
    body = client.get(f"/domains/{domain.name}/").content.decode()
    assert "History" in body and 'name="state_schema"' not in body
    assert client.post(f"/domains/{domain.name}/", form(domain, description="Mine")).status_code == 403
    domain.refresh_from_db()
    assert domain.description == "A shop" and domain.version == 1


def test_domain_update_service(domain, users):
    updated = domain_update(domain=domain, expected_version=1, actor=users["curator"], description="Shop v2")
    assert updated.version == 2 and updated.description == "Shop v2" and updated.initial_state == STATE
    with pytest.raises(VersionConflict):
        domain_update(domain=domain, expected_version=1, actor=users["curator"], description="stale")
    domain.refresh_from_db()
    assert domain.description == "Shop v2"
