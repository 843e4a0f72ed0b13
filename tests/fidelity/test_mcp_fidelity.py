"""Real APIs from an MCP server the tests start (a small store with state, over stdio and streamable HTTP): its
APIs imported, a rollout run on them (against the simulator and against the server itself), and fidelity
reported per API with every outcome."""

import json

import pytest
from django.core.management import call_command

from simia_web.catalog.importers import ImportRejected, apis_import
from simia_web.catalog.mcp import McpServer
from simia_web.catalog.models import Api, Domain, DomainReference, Task
from simia_web.catalog.references import ReferenceConfig, reference_set
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Trajectory
from simia_web.fidelity.models import FidelityCall, FidelityRun, Outcome
from simia_web.synthesis.services import rollout_queue
from tests.support.llm_stub import Reply
from tests.support.mcp_store import HttpStore, stdio_command
from tests.support.scripts import JUDGE_PASS

from .conversations import report_of, trajectory

STORE = McpServer(command=stdio_command())
ITEM = {"item_id": "I1", "name": "Desk lamp", "price": 30, "stock": 4}


@pytest.fixture
def http_store():
    store = HttpStore().start()
    yield store
    store.stop()


def store_domain(name: str = "store") -> Domain:
    apis_import(domain=name, mcp=STORE)
    return Domain.objects.get(name=name)


@pytest.mark.django_db
def test_the_stdio_servers_tools_become_apis_named_in_snake_case_with_their_kinds():
    domain = store_domain()
    apis = {api.name: api for api in Api.objects.filter(domain=domain)}
    assert set(apis) == {"get_item", "get_stock_level", "update_price", "buy_item", "reset_store"}
    assert {name for name, api in apis.items() if api.kind == "read"} == {"get_item", "get_stock_level"}
    assert apis["get_stock_level"].provenance["tool"] == "getStockLevel"
    assert apis["buy_item"].parameters["required"] == ["item_id"]
    assert apis["buy_item"].parameters["properties"]["quantity"]["default"] == 1
    assert all(api.valid for api in apis.values())


@pytest.mark.django_db
def test_streamable_http_import_over_rest_and_commands_only_for_admins(client_for, http_store):
    curator = client_for("curator")
    answer = curator.post("/api/v1/apis/import/", {"domain": "store", "mcp_url": http_store.url}, "application/json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["created"]["apis"] == 5 and answer.json()["format"] == "mcp"
    body = {"domain": "other", "mcp_command": stdio_command()}
    assert curator.post("/api/v1/apis/import/", body, "application/json").status_code == 403
    page_form = {"api_domain": "other", "source": "mcp_command", "location": "x"}
    assert curator.post("/apis/import/", page_form).status_code == 403
    assert not Domain.objects.filter(name="other").exists()
    admin = client_for("admin")
    assert admin.post("/api/v1/apis/import/", body, "application/json").status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://169.254.169.254/mcp", "link-local or cloud metadata address"),
        ("http://[fe80::1]:8000/mcp", "link-local"),
        ("http://metadata.google.internal/mcp", "cloud metadata service"),
        ("http://user:secret@127.0.0.1:1/mcp", "must not contain credentials"),
        ("file:///etc/passwd", "http:// or https://"),
    ],
)
def test_unsafe_urls_are_refused_for_imports_and_references(url, message):
    with pytest.raises(ImportRejected) as refused:
        apis_import(domain="store", mcp=McpServer(url=url))
    assert refused.value.errors[0].field == "url" and message in refused.value.errors[0].message
    domain = Domain.objects.create(name="store")
    with pytest.raises(ValidationFailed, match=message):
        reference_set(domain=domain, config=ReferenceConfig(url=url))


@pytest.mark.django_db
def test_a_server_that_cannot_start_is_reported_and_nothing_is_written():
    with pytest.raises(ImportRejected) as refused:
        apis_import(domain="store", mcp=McpServer(command="/no/such/server --flag"))
    [issue] = refused.value.errors
    assert issue.file == "command '/no/such/server --flag'"
    assert issue.message.startswith("cannot start a session: FileNotFoundError")
    assert not Domain.objects.exists()


def test_fidelity_over_stdio_reports_every_outcome_per_api(eager, capsys, client_for):
    domain = store_domain()
    changed = {**ITEM, "price": 35}
    first = trajectory(
        domain,
        [
            ("update_price", {"item_id": "I1", "price": 35}, changed),  # equal
            ("get_item", {"item_id": "I1"}, '{"stock": 4, "price": "35", "name": " Desk  lamp", "item_id": "I1"}'),
            ("buy_item", {"item_id": "I2"}, {"item_id": "I2", "bought": 1, "note": "<b>sold</b>"}),  # out of stock
            ("get_item", {"item_id": "I9"}, {"error": "no such item"}),  # both report an error
            ("teleport_item", {"item_id": "I1"}, {"ok": True}),  # not a tool of the server
        ],
    )
    second = trajectory(domain, [("get_item", {"item_id": "I1"}, ITEM)])  # a fresh session: the old price again
    refused = trajectory(
        domain, [("get_item", {"item": 1}, {"error": "invalid_tool_call"})], steps={"3": {"rejected": True}}
    )

    call_command("fidelity", "--domain", "store", "--mcp", stdio_command())
    report = report_of(capsys.readouterr().out)

    assert DomainReference.objects.get(domain=domain).command == stdio_command()  # remembered on the domain
    assert report["calls"] == {"equal": 2, "equivalent": 2, "different": 1, "reference_error": 1}
    assert report["fidelity"] == pytest.approx(4 / 5)
    assert report["apis"]["get_item"] == {
        "calls": 3,
        "equal": 1,
        "equivalent": 2,
        "different": 0,
        "reference_error": 0,
        "fidelity": 1.0,
    }
    assert report["apis"]["buy_item"]["different"] == 1 and report["apis"]["buy_item"]["fidelity"] == 0.0
    assert (
        report["apis"]["teleport_item"]["reference_error"] == 1 and report["apis"]["teleport_item"]["fidelity"] is None
    )
    assert report["trajectories"] == {"measured": 3, "sessions_failed": 0, "mean_fidelity": 0.875, "skipped_calls": 1}
    assert "structural" in report["method"]

    first.refresh_from_db(), second.refresh_from_db(), refused.refresh_from_db()
    assert (first.fidelity, second.fidelity, refused.fidelity) == (0.75, 1.0, None)
    buy = FidelityCall.objects.get(api="buy_item")
    assert buy.reference_is_error and "not enough I2 in stock" in buy.reference
    assert buy.outcome == Outcome.DIFFERENT and buy.detail.startswith("/: simulated an object, reference 'Error")
    teleport = FidelityCall.objects.get(api="teleport_item")
    assert teleport.detail == "the reference has no tool 'teleport_item'"

    run = FidelityRun.objects.get()
    page = client_for("annotator").get(f"/fidelity/{run.pk}/")
    assert page.status_code == 200
    assert b"&lt;b&gt;sold&lt;/b&gt;" in page.content and b"<b>sold</b>" not in page.content  # shown escaped
    assert b"teleport_item" in page.content and b"80%" in page.content
    queue = client_for("annotator").get("/review/?status=all")
    assert b"75%" in queue.content and b">Fidelity<" in queue.content
    job_page = client_for("annotator").get(f"/jobs/{run.job_id}/")
    assert f'href="/fidelity/{run.pk}/"'.encode() in job_page.content


def test_fidelity_over_http_resets_the_server_for_each_trajectory(eager, client_for, http_store):
    domain = store_domain()
    trajectory(domain, [("buy_item", {"item_id": "I1"}, {"item_id": "I1", "bought": 1, "stock": 3})])
    trajectory(domain, [("buy_item", {"item_id": "I1"}, {"item_id": "I1", "bought": 1, "stock": 3})])
    curator = client_for("curator")
    reference = {"url": http_store.url, "reset_tool": "reset_store"}
    assert curator.put("/api/v1/domains/store/reference/", reference, "application/json").status_code == 200
    assert curator.get("/api/v1/domains/store/reference/").json()["reset_tool"] == "reset_store"

    queued = curator.post("/api/v1/jobs/", {"kind": "fidelity", "domain": "store"}, "application/json")
    assert queued.status_code == 202, queued.content
    run = FidelityRun.objects.get(job_id=queued.json()["id"])
    summary = curator.get(f"/api/v1/fidelity/runs/{run.pk}/").json()["summary"]
    assert summary["calls"]["equal"] == 2 and summary["fidelity"] == 1.0  # the second saw a stock of 4 again
    calls = curator.get(f"/api/v1/fidelity/runs/{run.pk}/calls/?api=buy_item").json()["results"]
    assert [call["reference"]["stock"] for call in calls] == [3, 3]


@pytest.mark.django_db
def test_the_reference_is_named_on_the_domain_page_and_commands_need_an_admin(client_for):
    store_domain()
    curator = client_for("curator")
    command = {"command": stdio_command()}
    assert curator.put("/api/v1/domains/store/reference/", command, "application/json").status_code == 403
    answer = curator.post("/domains/store/reference/", {"kind": "command", "location": stdio_command()}, follow=True)
    assert b"needs a site administrator" in answer.content and not DomainReference.objects.exists()
    answer = curator.post("/domains/store/reference/", {"kind": "url", "location": "http://127.0.0.1:9/mcp"})
    assert answer.status_code == 302 and DomainReference.objects.get().url == "http://127.0.0.1:9/mcp"
    page = client_for("annotator").get("/domains/store/")
    assert b'id="reference"' in page.content and b"http://127.0.0.1:9/mcp" in page.content
    assert b'id="reference-form"' not in page.content  # annotators read it, curators change it
    assert (
        client_for("annotator").put("/api/v1/domains/store/reference/", command, "application/json").status_code == 403
    )
    admin = client_for("admin")
    assert admin.put("/api/v1/domains/store/reference/", command, "application/json").status_code == 200
    assert admin.delete("/api/v1/domains/store/reference/").status_code == 204


def store_responder(fallback):
    """The agent looks up I1, buys one and answers; the simulator answers from the store it imagines."""

    def respond(request):
        if request.stage == "agent":
            calls = [m for m in request.messages if m.get("role") == "tool"]
            if not calls:
                return Reply(tool_calls=[{"name": "get_item", "arguments": {"item_id": "I1"}}])
            if len(calls) == 1:
                return Reply(tool_calls=[{"name": "buy_item", "arguments": {"item_id": "I1", "quantity": 1}}])
            return Reply(content="You bought one desk lamp.")
        if request.stage == "simulator":
            api = (request.user_payload() or {}).get("api", {}).get("name")
            response = ITEM if api == "get_item" else {"item_id": "I1", "bought": 1, "stock": 3}
            return Reply(content={"response": json.dumps(response), "patch": []})
        if request.stage == "judge":
            return Reply(content=JUDGE_PASS)
        return fallback(request)

    return respond


def test_a_rollout_runs_on_the_imported_apis_against_the_simulator_and_against_the_reference(eager, llm_stub, capsys):
    domain = store_domain()
    Task.objects.create(domain=domain, instruction="Buy one desk lamp (item I1).", expected_outcome="I1 bought")
    llm_stub.responder = store_responder(llm_stub.responder)

    rollout_queue(domain="store")
    simulated = Trajectory.objects.get()
    assert simulated.status == "judged_pass" and simulated.tool_call_count == 2

    reference_set(domain=domain, config=ReferenceConfig(command=stdio_command()))
    rollout_queue(domain="store", environment="reference")
    real = Trajectory.objects.exclude(pk=simulated.pk).get()
    assert real.provenance["environment"] == "reference"
    tool_messages = [m for m in real.messages if m["role"] == "tool"]
    assert json.loads(tool_messages[1]["content"]) == {"item_id": "I1", "bought": 1, "stock": 3}  # the store's answer
    assert all(step["environment"] == "reference" for step in real.steps.values())
    assert sum(r.stage == "simulator" for r in llm_stub.requests) == 2  # the first rollout's calls only

    call_command("fidelity", "--domain", "store")  # the reference remembered; real trajectories are not replayed
    report = report_of(capsys.readouterr().out)
    assert report["trajectories"]["measured"] == 1
    assert report["apis"]["get_item"]["equal"] == 1 and report["apis"]["buy_item"]["equal"] == 1


@pytest.mark.django_db
def test_a_reference_rollout_needs_a_reference():
    store_domain()
    Task.objects.create(domain=Domain.objects.get(), instruction="Buy a lamp.")
    with pytest.raises(ValidationFailed, match="no reference environment"):
        rollout_queue(domain="store", environment="reference")


def test_apis_imported_over_http_roll_out_against_the_simulator_and_the_http_reference(eager, llm_stub, http_store):
    apis_import(domain="store", mcp=McpServer(url=http_store.url))
    domain = Domain.objects.get(name="store")
    Task.objects.create(domain=domain, instruction="Buy one desk lamp (item I1).", expected_outcome="I1 bought")
    llm_stub.responder = store_responder(llm_stub.responder)
    reference_set(domain=domain, config=ReferenceConfig(url=http_store.url, reset_tool="reset_store"))

    rollout_queue(domain="store", rollouts=2)
    rollout_queue(domain="store", rollouts=2, environment="reference")
    real = Trajectory.objects.filter(provenance__environment="reference")
    assert Trajectory.objects.count() == 4 and real.count() == 2
    for rollout in real:  # each rollout in a fresh session: the store was reset, its stock 4 again
        answer = json.loads([m for m in rollout.messages if m["role"] == "tool"][1]["content"])
        assert answer == {"item_id": "I1", "bought": 1, "stock": 3}
