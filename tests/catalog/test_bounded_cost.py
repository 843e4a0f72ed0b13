"""No request buys minutes of CPU or gigabytes of memory: each hostile input is refused or answered within CPU
and peak-memory bounds, measured in a forked child (tests.support.cost), never by the clock.

The bounds leave room for a slow, shared machine and still catch the costs these inputs had: 84 s of CPU for
8,000 objects under `uniqueItems`, +1.3 GB to refuse a 51 KB zip, 2 GB for a simulator's patch of copies."""

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Api, Domain, Seed
from simia_web.core.json_input import JsonLimits, JsonRefused, json_parse, value_check
from simia_web.core.schemas import first_error, schema_error, schema_errors
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.environments.models import EnvSession
from simia_web.exports.models import Snapshot
from simia_web.simulation.simulator import PATCH_MAX_OPERATIONS, state_apply
from tests.environments import conftest as environments
from tests.environments.conftest import tool_call
from tests.support.cost import cost_of
from tests.support.factories import make_trajectory
from tests.support.llm_stub import Reply
from tests.support.scripts import JUDGE_PASS, SHOP

# A tool whose arguments hold an array of objects that must be unique.
UNIQUE_TAGS = {
    "type": "object",
    "properties": {"tags": {"type": "array", "uniqueItems": True, "items": {"type": "object"}}},
    "required": ["tags"],
}


def objects(count: int, *, duplicate_last: bool = True) -> list[dict]:
    items = [{"id": i, "label": f"tag {i}", "meta": {"rank": i % 7, "on": i % 2 == 0}} for i in range(count)]
    if duplicate_last:
        items.append({"meta": {"on": True, "rank": 0}, "label": "tag 0", "id": 0.0})  # equal to the first
    return items


def api(users, role: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=users[role])}")
    return client


def nested_lists(size: int) -> bytes:
    """`{"a":[[],[],...]}` of about `size` bytes: 3 bytes of text per empty list, 64 of memory once parsed."""
    return b'{"a":[' + b",".join([b"[]"] * (size // 3)) + b"]}"


shop, script = environments.shop, environments.script  # a domain an RL session can play, its scripted LLM

# ---------------------------------------------------------------- uniqueItems and other keywords


@pytest.fixture
def tagging_shop(shop):
    Api.objects.create(domain=shop["domain"], name="tag_order", kind="write", parameters=UNIQUE_TAGS)
    return shop


def test_unique_items_over_8000_objects_in_an_rl_step(tagging_shop, script, users, llm_stub):
    client = api(users, "curator")
    created = client.post("/api/v1/envs/", {"task": tagging_shop["tasks"][0].pk}, format="json")
    session = created.json()["id"]
    message = tool_call("tag_order", json.dumps({"tags": objects(8000)}))

    def step():
        response = client.post(f"/api/v1/envs/{session}/step", {"message": message}, format="json")
        return response.status_code, response.json()["observation"][0]["content"]

    cost = cost_of(step)
    status, observation = cost.result
    assert status == 200 and "non-unique elements: items 0 and 8000 are equal" in observation
    assert cost.cpu_seconds < 5, cost  # jsonschema's pairwise check: 84 s
    assert cost.peak_mb < 150, cost
    assert llm_stub.stage_requests("simulator") == []


def test_unique_items_in_the_editors_check_call(client_for):
    trajectory = make_trajectory()
    trajectory.tools = [{"type": "function", "function": {"name": "tag_order", "parameters": UNIQUE_TAGS}}]
    trajectory.save(update_fields=["tools"])
    client = client_for("annotator")
    data = {"call-3-0-name": "tag_order", "call-3-0-args": json.dumps({"tags": objects(8000)})}

    def check():
        response = client.post(f"/trajectories/{trajectory.pk}/check-call/", data)
        return response.status_code, response.content.decode()

    cost = cost_of(check)
    status, body = cost.result
    assert status == 200 and "non-unique elements" in body
    assert cost.cpu_seconds < 5 and cost.peak_mb < 150, cost


def test_unique_items_costs_grow_linearly():
    """Eight times the items cost 22 to 23 times the CPU here (more than eight: the larger set's garbage collections
    each walk more live objects), where pairwise checks cost 64 times, seconds at 64,000. The bound sits between
    the two. Both sizes are measured in one run, the least of a few tries each, so the machine's speed and its
    moments of noise cancel out."""
    schema = {"type": "array", "uniqueItems": True}

    def cpu_seconds(count: int) -> float:
        assert schema_errors(schema, objects(count, duplicate_last=False)) == []
        cost = cost_of(lambda: [e.message for e in schema_errors(schema, objects(count))])
        assert cost.result == [f"has non-unique elements: items 0 and {count} are equal"]
        return cost.cpu_seconds

    cpu_seconds(1_000)  # warm
    small = min(cpu_seconds(8_000) for _ in range(3))
    large = min(cpu_seconds(64_000) for _ in range(2))
    assert large < 40 * small, (small, large)


def test_unique_items_keeps_json_schema_equality():
    unique = {"type": "array", "uniqueItems": True}
    assert schema_errors(unique, [1, True, "1", [1], {"a": 1}, 0, False, None, [True], {"a": True}]) == []
    for equal_pair in ([1, 1.0], [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}], [[1, [2]], [1.0, [2.0]]], [None, None]):
        assert schema_errors(unique, equal_pair), equal_pair
    assert first_error({"enum": [1, {"a": [True]}]}, {"a": [True]}) is None
    assert first_error({"enum": [1, {"a": [True]}]}, {"a": [1]}) is not None
    assert first_error({"const": {"x": 1.0}}, {"x": 1}) is None and first_error({"const": 1}, True) is not None


def test_an_enum_of_many_values_is_hashed_once_per_check():
    schema = {"type": "array", "items": {"enum": [f"value {i}" for i in range(50_000)]}}
    cost = cost_of(lambda: len(schema_errors(schema, [f"value {i % 50_000}" for i in range(100_000)])))
    assert cost.result == 0 and cost.cpu_seconds < 3, cost


def test_refs_that_double_at_each_level_are_stopped_by_the_budget():
    levels = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)}
    schema = {"$defs": {**levels, "d40": {"type": "string"}}, "$ref": "#/$defs/d0"}
    assert schema_error(schema) is None
    cost = cost_of(lambda: [(e.validator, e.message) for e in schema_errors(schema, "x")])
    [(validator, message)] = cost.result
    assert validator == "budget" and "steps" in message
    assert cost.cpu_seconds < 5, cost  # 2**40 checks otherwise


def test_a_ref_loop_is_a_broken_schema_not_a_crash():
    from simia_web.formats.rules import argument_violations

    [violation] = argument_violations({"$ref": "#"}, {"a": 1}, 2, "loop")
    assert violation.code == "tool_schema_invalid" and "refers back to itself" in violation.detail


def test_the_metaschema_check_is_linear_too():
    mixed = {"type": "object", "required": ["a", 1] * 50_000}  # jsonschema's uniq falls back to pairs on mixed types
    cost = cost_of(lambda: schema_error(mixed))
    assert "is not of type 'string'" in cost.result and cost.cpu_seconds < 5, cost


# ---------------------------------------------------------------- parsing counts values, not only bytes


def test_a_rest_body_of_nested_empty_lists_is_refused_before_it_is_parsed(users, settings):
    client = api(users, "curator")
    body = nested_lists(settings.SIMIA_JSON_MAX_BYTES - 100)

    def post():
        response = client.post("/api/v1/jobs/", body, content_type="application/json")
        return response.status_code, response.content.decode()

    cost = cost_of(post)
    status, content = cost.result
    assert status == 400 and "values (items of arrays and objects" in content, content[:300]
    assert cost.peak_mb < 5 * settings.SIMIA_JSON_MAX_BYTES / 2**20, cost  # parsed, +269 MB


def _tau2_zip(db: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("shop/policy.md", "Be helpful.")
        archive.writestr("shop/tools.json", "[]")
        archive.writestr("shop/tasks.json", "[]")
        archive.writestr("shop/db.json", db)
    return buffer.getvalue()


def test_a_tau2_zip_whose_database_inflates_to_nested_lists_is_refused_within_bounds(users, settings):
    data = _tau2_zip(nested_lists(settings.SIMIA_IMPORT_MAX_BYTES - 1000))
    assert len(data) < 200_000  # 50 MB inflated
    client = api(users, "curator")

    def upload():
        response = client.post(
            "/api/v1/seeds/upload/", {"file": SimpleUploadedFile("shop.zip", data), "format": "tau2"}
        )
        return response.status_code, response.content.decode()

    cost = cost_of(upload)
    status, content = cost.result
    assert status == 400 and "db.json" in content and "values (items of arrays and objects" in content, content
    assert cost.peak_mb < 4 * settings.SIMIA_IMPORT_MAX_BYTES / 2**20, cost  # parsed: +1,304 MB
    assert cost.cpu_seconds < 5, cost
    assert not Domain.objects.exists() and not Seed.objects.exists()


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ('{"a": "[[[,,,,,]]]", "b": ["x,y", "[{"]}', 4),  # brackets and commas inside strings are not values
        ('["\\"[,", "\\\\", [1, 2], [], {}]', 9),
        ("[" + ",".join(["1"] * 100) + "]", 100),
    ],
)
def test_values_are_counted_outside_strings(text, limit):
    limits = JsonLimits.from_settings(max_values=limit)
    json_parse(text, limits=limits)
    json_parse(text.encode(), limits=limits)
    with pytest.raises(JsonRefused, match="values"):
        json_parse("[" + text + ", 0, 0]", limits=JsonLimits.from_settings(max_values=limit + 1))


def test_counting_a_text_full_of_quotes_is_linear():
    for text in (
        '"' + '\\"' * 2_000_000,  # a string that never ends, full of escaped quotes
        "[" + '"\\",' * 2_000_000,  # quotes, escapes and commas, which is not JSON after its first string
        '["' + ',"",' * 2_000_000 + '"]',
    ):
        cost = cost_of(lambda text=text: _refused(text, JsonLimits.from_settings(max_values=10)))
        assert cost.result != "accepted" and cost.cpu_seconds < 3, cost


def _refused(text, limits) -> str:
    try:
        json_parse(text, limits=limits)
    except JsonRefused as exc:
        return str(exc)
    return "accepted"


def test_values_built_in_memory_are_counted_and_refusals_name_the_place():
    limits = JsonLimits.from_settings(max_values=10)
    value_check({"a": list(range(8))}, limits=limits)
    with pytest.raises(JsonRefused, match="more than 10 values") as refused:
        value_check({"a": [1, [2, 3, 4], {"b": [5, 6, 7, 8, 9]}]}, limits=limits)
    assert refused.value.path.startswith("a[")
    with pytest.raises(JsonRefused) as deep:
        value_check({"a": [{"b": [1, {"c": float("nan")}]}]})
    assert deep.value.path == "a[0].b[1].c"


# ---------------------------------------------------------------- the simulator's patch


def doubling_copies(count: int) -> list[dict]:
    return [{"op": "copy", "from": "/orders", "path": f"/orders/copy{i}"} for i in range(count)]


def test_a_patch_of_copies_is_stopped_before_the_state_grows():
    state = SHOP["initial_state"]
    cost = cost_of(lambda: state_apply(state, doubling_copies(PATCH_MAX_OPERATIONS), SHOP["state_schema"]))
    kept, error = cost.result
    assert kept == state and "would take the state over" in error
    assert cost.cpu_seconds < 2 and cost.peak_mb < 100, cost  # 19 copies: 35.6 MB, 23.5 s, 2 GB


def test_a_patch_has_a_bounded_number_of_operations():
    replaces = [{"op": "replace", "path": "/orders/W1/status", "value": "x"}] * (PATCH_MAX_OPERATIONS + 1)
    kept, error = state_apply(SHOP["initial_state"], replaces, None)
    assert kept == SHOP["initial_state"] and f"at most {PATCH_MAX_OPERATIONS}" in error
    applied, error = state_apply(SHOP["initial_state"], doubling_copies(3), None)
    assert error is None and "copy2" in applied["orders"]


def test_an_rl_step_whose_simulator_answers_copies_costs_little(shop, script, users, llm_stub):
    copies = Reply(content={"response": {"ok": True}, "patch": doubling_copies(PATCH_MAX_OPERATIONS)})
    answer = script.__call__

    def responder(request):
        return copies if request.stage == "simulator" else answer(request)

    llm_stub.responder = responder
    script.judge = JUDGE_PASS
    client = api(users, "curator")
    session = client.post("/api/v1/envs/", {"task": shop["tasks"][0].pk}, format="json").json()["id"]
    message = tool_call("cancel_order", json.dumps({"order_id": "W1", "reason": "wrong size"}))

    def step():
        response = client.post(f"/api/v1/envs/{session}/step", {"message": message}, format="json")
        return response.status_code, response.json()["info"]["tool_errors"]

    cost = cost_of(step)
    status, errors = cost.result
    assert status == 200 and "would take the state over" in json.dumps(errors)
    assert cost.cpu_seconds < 3 and cost.peak_mb < 100, cost
    assert EnvSession.objects.get(pk=session).state == SHOP["initial_state"]


# ---------------------------------------------------------------- free-text filters on every path


LONG_QUERY = " ".join(f"word{i}" for i in range(50_000))


def test_a_long_bulk_query_is_refused_and_changes_nothing(client_for):
    from urllib.parse import urlencode

    pending = [make_trajectory(judge={"passed": True, "score": 0.9}) for _ in range(3)]
    response = client_for("curator").post(
        "/review/bulk/",
        {"action": "reject", "scope": "all", "reason": "noise", "query": urlencode({"q": LONG_QUERY})},
    )
    assert response.status_code == 400, response.content[:300]
    assert "q: at most 500 characters (SIMIA_QUERY_MAX_LENGTH)" in response.content.decode()
    assert not Review.objects.exists()
    assert all(Trajectory.objects.get(pk=t.pk).status == t.status for t in pending)


@pytest.mark.parametrize("url", ["/review/", "/domains/", "/tasks/", "/apis/", "/seeds/"])
@pytest.mark.parametrize("name", ["q", "domain"])
def test_a_long_filter_on_a_page_is_a_400_naming_it(client_for, url, name):
    response = client_for("curator").get(url, {name: LONG_QUERY})
    if (url, name) in (("/seeds/", "q"), ("/domains/", "domain")):
        assert response.status_code == 200  # not a filter of that page
    else:
        assert response.status_code == 400, (url, name, response.status_code)
        assert f"{name}: at most 500 characters" in response.content.decode()


def test_a_long_choice_on_the_job_list_is_refused_like_any_unknown_choice(client_for):
    response = client_for("curator").get("/jobs/", {"status": LONG_QUERY, "kind": LONG_QUERY})
    assert response.status_code == 400 and "at most 500 characters" in response.content.decode()


def test_a_long_filter_is_refused_when_a_snapshot_is_asked_for(users):
    Trajectory.objects.filter(pk=make_trajectory().pk).update(status=TrajectoryStatus.ACCEPTED)
    response = api(users, "curator").post(
        "/api/v1/snapshots/", {"format": "openai", "filters": {"q": LONG_QUERY}}, format="json"
    )
    assert response.status_code == 400 and "filters.q" in response.json(), response.content[:300]
    assert "at most 500 characters" in json.dumps(response.json())
    assert not Snapshot.objects.exists()


def test_a_long_filter_in_the_rest_list_is_a_400(users):
    response = api(users, "curator").get("/api/v1/trajectories/", {"q": LONG_QUERY})
    assert response.status_code == 400 and "q" in response.json()


# ---------------------------------------------------------------- lists do not parse each row's domain


def test_lists_do_not_parse_the_world_state_of_each_rows_domain(users, client_for):
    from simia_web.catalog.models import Task

    big = {"users": {f"user_{i}": {"name": f"User {i}", "orders": list(range(20))} for i in range(20_000)}}
    domain = Domain.objects.create(name="bigstate", initial_state=big)
    for _ in range(50):
        Trajectory.objects.filter(pk=make_trajectory(domain="bigstate").pk).update(domain=domain)
    Task.objects.bulk_create(Task(domain=domain, instruction=f"Task {i}") for i in range(50))
    rest, page = api(users, "curator"), client_for("curator")
    for url, client in (("/api/v1/trajectories/", rest), ("/api/v1/tasks/", rest), ("/tasks/", page), ("/apis/", page)):
        cost = cost_of(lambda client=client, url=url: client.get(url).status_code)
        assert cost.result == 200 and cost.cpu_seconds < 0.5, (url, cost)  # 50 rows x 2 MB of state parsed


# ---------------------------------------------------------------- uploads capped while they stream


def _multipart(size: int) -> tuple[bytes, str]:
    boundary = "simia-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\nopenai\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="seeds.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return head + b"x" * size + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize(("url", "status"), [("/api/v1/seeds/upload/", 400), ("/seeds/upload/", 413)])
def test_a_file_over_the_import_limit_is_refused_as_it_streams_before_disk(users, client_for, settings, url, status):
    settings.SIMIA_IMPORT_MAX_BYTES = 2**20
    settings.SIMIA_REQUEST_MAX_BYTES = 64 * 2**20
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # any file would be spooled to disk
    body, content_type = _multipart(32 * 2**20)
    client = api(users, "curator") if url.startswith("/api/") else client_for("curator")

    def upload():
        response = client.generic("POST", url, body, content_type=content_type)
        return response.status_code, response.content.decode()[:500]

    cost = cost_of(upload)
    answer, content = cost.result
    assert answer == status and "larger than 1,048,576 bytes (SIMIA_IMPORT_MAX_BYTES)" in content, cost
    assert cost.written_mb < 1.5, cost  # at most the first MiB reached the temporary file
    assert not Seed.objects.exists()


@pytest.mark.parametrize(("url", "status"), [("/api/v1/seeds/upload/", 400), ("/seeds/upload/", 413)])
def test_a_body_over_the_request_limit_is_refused_before_it_is_read(users, client_for, url, status):
    body, content_type = _multipart(1000)
    client = api(users, "curator") if url.startswith("/api/") else client_for("curator")

    def upload():
        # Told 400 MB are coming: the test client's body would raise if more than its 1 KB were read.
        response = client.generic("POST", url, body, content_type=content_type, CONTENT_LENGTH=str(400 * 2**20))
        return response.status_code, response.content.decode()[:500]

    cost = cost_of(upload)
    answer, content = cost.result
    assert answer == status and "(SIMIA_REQUEST_MAX_BYTES)" in content, cost
    assert cost.written_mb < 0.1, cost
