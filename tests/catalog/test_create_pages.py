"""Catalog pages that create: a domain, an API and a task by form, each with revision 1 and an audit event; every
refusal is the form again with what to do; annotators cannot."""

import json

import pytest

from simia_web.catalog.models import Api, Domain, Task, TaskStatus
from simia_web.core.models import AuditEvent, Revision

PARAMETERS = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def _api(**overrides):
    return {
        "domain": "shop",
        "name": "get_order",
        "kind": "read",
        "description": "An order by id.",
        "parameters": json.dumps(PARAMETERS),
        **overrides,
    }


def test_annotators_cannot_create(client_for):
    client = client_for("annotator")
    for url in ("/domains/new/", "/apis/new/", "/tasks/new/"):
        assert client.get(url).status_code == 403
        assert client.post(url, {"name": "shop"}).status_code == 403
    assert not Domain.objects.exists()


def test_domain_api_and_task_by_form(client_for):
    client = client_for("curator")
    assert client.get("/tasks/new/").status_code == 200
    assert b"There is no domain yet" in client.get("/apis/new/").content
    made = client.post("/domains/new/", {"name": "shop", "description": "A shop.", "policy": "# Rules\n\nBe kind."})
    assert made.status_code == 302 and made["Location"] == "/domains/shop/"
    shop = Domain.objects.get(name="shop")
    assert (shop.source, shop.policy, shop.version) == ("manual", "# Rules\n\nBe kind.", 1)
    assert client.post("/apis/new/", _api()).status_code == 302
    write = _api(name="cancel_order", kind="write", description="Cancel an order.")
    assert client.post("/apis/new/", write).status_code == 302
    shop.refresh_from_db()
    assert set(shop.apis.values_list("name", flat=True)) == {"get_order", "cancel_order"}
    assert shop.state_errors == []  # a read-only and a state-changing API: the set is complete
    task = {"domain": "shop", "instruction": "Cancel order W1.", "apis_needed": "get_order, cancel_order"}
    done = client.post("/tasks/new/", task)
    assert done.status_code == 302
    made_task = Task.objects.get()
    assert made_task.status == TaskStatus.VALID and made_task.apis_needed == ["get_order", "cancel_order"]
    again = client.post("/tasks/new/", task, follow=True)
    assert b"near-duplicate of task" in again.content
    assert Task.objects.filter(status=TaskStatus.DUPLICATE).count() == 1
    for obj in (shop, Api.objects.get(name="get_order"), made_task):
        assert Revision.objects.filter(object_id=obj.pk, version=1).exists()
    assert {"domain.create", "api.create", "task.create"} <= set(AuditEvent.objects.values_list("action", flat=True))
    page = client.get("/domains/shop/").content.decode()
    assert "Add an API" in page and "Write a task" in page


@pytest.mark.parametrize(
    "url,data,field,message",
    [
        ("/domains/new/", {"name": ""}, "name", "This field is required"),
        ("/domains/new/", {"name": "Not A Slug"}, "name", "lower-case letters"),
        ("/domains/new/", {"name": "shop"}, "name", "exists already"),
        ("/domains/new/", {"name": "new"}, "name", "reserved"),
        ("/apis/new/", _api(domain=""), "domain", "This field is required"),
        ("/apis/new/", _api(name="GetOrder"), "name", "snake_case"),
        ("/apis/new/", _api(parameters="{not json"), "parameters", "Enter a valid JSON"),
        ("/apis/new/", _api(parameters='{"type": "array"}'), "parameters", "must describe an object"),
        ("/apis/new/", _api(name="existing_one"), "name", "already has an API"),
        ("/tasks/new/", {"domain": "shop", "instruction": ""}, "instruction", "This field is required"),
        ("/tasks/new/", {"domain": "shop", "instruction": "Do it", "apis_needed": "nope"}, "apis_needed", "no valid"),
    ],
)
def test_a_refused_item_is_the_form_again(client_for, url, data, field, message):
    shop = Domain.objects.create(name="shop")
    Api.objects.create(domain=shop, name="existing_one", parameters={"type": "object", "properties": {}})
    response = client_for("curator").post(url, data)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'class="topbar"' in page and 'id="catalog-create"' in page
    assert message in page, page[page.find("errorlist") - 300 : page.find("errorlist") + 300]
    assert Domain.objects.count() == 1 and Api.objects.count() == 1 and not Task.objects.exists()
