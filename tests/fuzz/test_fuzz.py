"""The fuzz suite: schemathesis over every REST endpoint, hypothesis-generated hostile JSON through every upload,
form and step path, and generated schemas (uniqueItems, combinators, deep nesting) over wide and deep instances.
No answer is a 5xx, a refused input writes nothing, memory stays bounded and a schema check's CPU time stays within
a constant per value. SIMIA_FUZZ_EXAMPLES raises the number of examples for a deeper run."""

import io
import json
import os
import tracemalloc
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Api, Domain, Seed, Task
from simia_web.core.models import Revision
from simia_web.curation.models import Trajectory
from simia_web.environments.models import EnvSession
from tests.core import test_schema
from tests.environments import conftest as environments
from tests.exports.data import trajectory_make

from .strategies import documents, hostile_texts

EXAMPLES = int(os.environ.get("SIMIA_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
MEMORY_BOUND = 200 * 1024 * 1024

wsgi_app = test_schema.wsgi_app  # the project's WSGI app, sharing the test's database connection
shop = environments.shop  # a domain with APIs, a world state and tasks an RL session can play


@pytest.fixture
def world(users, llm_stub, shop):
    task = shop["tasks"][0]
    trajectory = trajectory_make(shop["domain"], task=task)
    tokens = {role: user_token(user=users[role]) for role in users}
    return {"shop": shop["domain"], "task": task, "trajectory": trajectory, "tokens": tokens}


def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def catalog_counts() -> tuple:
    return tuple(model.objects.count() for model in (Domain, Api, Task, Seed, Revision))


def test_every_endpoint_answers_generated_requests_without_a_5xx(world, wsgi_app):
    """schemathesis over every operation of the OpenAPI schema, as an admin so that none is refused early."""
    headers = {"Authorization": f"Token {world['tokens']['admin']}"}
    checked = []
    for result in test_schema._schema(wsgi_app).get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(FUZZ, max_examples=max(3, EXAMPLES // 5))
        def check(case):
            response = case.call(headers=headers)
            assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])

        check()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert "POST /api/v1/envs/{session_id}/step" in checked and "GET /api/v1/llm/profiles/" in checked


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/envs/", "/api/v1/snapshots/", "step"])
def test_hostile_json_bodies_get_no_5xx(world, path):
    client = api(world["tokens"]["curator"])
    if path == "step":
        created = client.post("/api/v1/envs/", {"task": world["task"].pk}, format="json")
        path = f"/api/v1/envs/{created.json()['id']}/step"

    @given(text=hostile_texts | hostile_texts.map(lambda t: '{"message": ' + t + "}"))
    @FUZZ
    def check(text):
        response = client.post(path, text, content_type="application/json")
        assert response.status_code < 500, (path, text[:200], response.content[:500])

    check()


def _jsonl(texts: list[str]) -> bytes:
    return "\n".join(texts).encode("utf-8", "surrogatepass")


def _tau2_zip(tools: str, tasks: str, db: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("shop/policy.md", "Be helpful.")
        for name, text in (("tools.json", tools), ("tasks.json", tasks), ("db.json", db)):
            archive.writestr(f"shop/{name}", text.encode("utf-8", "surrogatepass"))
    return buffer.getvalue()


def test_hostile_uploads_are_refused_cleanly_with_bounded_memory(world):
    client = api(world["tokens"]["curator"])
    seed_files = st.lists(hostile_texts, min_size=1, max_size=4).map(_jsonl)
    tau2_files = st.tuples(documents, documents, documents).map(lambda parts: _tau2_zip(*parts))
    uploads = st.tuples(st.just("openai"), seed_files) | st.tuples(st.just("sharegpt"), seed_files)
    uploads |= st.tuples(st.just("tau2"), tau2_files)
    peaks = []

    @given(upload=uploads)
    @FUZZ
    def check(upload):
        format, data = upload
        before = catalog_counts()
        tracemalloc.start()
        try:
            response = client.post(
                "/api/v1/seeds/upload/",
                {"file": SimpleUploadedFile(f"fuzz.{'zip' if format == 'tau2' else 'jsonl'}", data), "format": format},
            )
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert response.status_code in (201, 400), response.content[:500]
        if response.status_code == 400:
            assert catalog_counts() == before, "a refused upload wrote something"

    check()
    assert max(peaks) < MEMORY_BOUND


def test_hostile_form_json_gets_no_5xx_and_writes_nothing_when_refused(client_for, world):
    client = client_for("curator")
    trajectory, shop = world["trajectory"], world["shop"]

    @given(text=hostile_texts)
    @FUZZ
    def check(text):
        trajectory.refresh_from_db()
        shop.refresh_from_db()
        review = client.post(
            f"/trajectories/{trajectory.pk}/decide/",
            {"decision": "fix_accept", "mode": "json", "messages_json": text, "version": trajectory.version},
            HTTP_HX_REQUEST="true",
        )
        assert review.status_code < 500, review.content[:500]
        edit = client.post(
            f"/domains/{shop.name}/",
            {"version": shop.version, "state_schema": text, "initial_state": text},
        )
        assert edit.status_code < 500, edit.content[:500]
        if edit.status_code == 200:  # the form came back with its errors: nothing saved
            assert Domain.objects.get(pk=shop.pk).version == shop.version

    check()
    assert Trajectory.objects.filter(pk=trajectory.pk).exists() and not EnvSession.objects.exists()


# Schemas an upload, an editor or an LLM could write: uniqueItems at any level, combinators, enum and const, nested.
_leaf_schemas = st.sampled_from(
    [
        {},
        {"type": "string"},
        {"type": "integer"},
        {"type": "object"},
        {"enum": [1, "a", {"k": [1]}]},
        {"const": {"a": 1}},
    ]
)
fuzz_schemas = st.recursive(
    _leaf_schemas,
    lambda inner: st.one_of(
        st.builds(lambda s, unique: {"type": "array", "items": s, "uniqueItems": unique}, inner, st.booleans()),
        st.builds(lambda s: {"type": "object", "properties": {"a": s, "b": s}, "additionalProperties": s}, inner),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"allOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
        st.builds(lambda s: {"not": s}, inner),
        st.builds(lambda s: {"contains": s, "uniqueItems": True}, inner),
        st.builds(lambda s: {"items": {"$ref": "#/$defs/nested"}, "contains": s}, inner),
    ),
    max_leaves=12,
).map(
    # A recursive definition at the root: arrays of arrays, unique at every level.
    lambda s: {"$defs": {"nested": {"items": {"$ref": "#/$defs/nested"}, "uniqueItems": True}}, "allOf": [s]}
)


def _instance(width: int, depth: int, shape: str):
    """A wide array of objects or arrays (with a repeat at the end), under `depth` levels of nesting."""
    item = {"object": lambda i: {"a": i % 13, "b": [i, {"c": str(i)}]}, "array": lambda i: [i % 7, [i]]}[shape]
    value = [item(i) for i in range(width)] + [item(0)]
    for level in range(depth):
        value = {"a": value, "b": [level]} if level % 2 else [value, level]
    return value


def test_schema_checks_stay_within_cpu_bounds_for_generated_schemas_and_instances():
    """Whatever the schema, a check costs at most a constant per value of the instance (core.schemas' budget)."""
    import time

    from simia_web.core.schemas import STEPS_BASE, STEPS_PER_VALUE, schema_error, schema_errors

    instances = st.builds(
        _instance,
        st.integers(min_value=0, max_value=4_000),
        st.integers(min_value=0, max_value=40),
        st.sampled_from(["object", "array"]),
    )

    unique_objects = {"type": "array", "items": {"type": "object"}, "uniqueItems": True}
    nested_choices = {"anyOf": [{"type": "integer"}, {"allOf": [{"not": {"type": "string"}}, {"uniqueItems": True}]}]}

    @given(schema=fuzz_schemas, instance=instances)
    @example(schema={"allOf": [unique_objects]}, instance=_instance(4_000, 0, "object"))
    @example(schema={"items": nested_choices, "uniqueItems": True}, instance=_instance(4_000, 40, "array"))
    @FUZZ
    def check(schema, instance):
        assert schema_error(schema) is None, schema
        values = len(json.dumps(instance))  # an upper bound of the values it holds
        started = time.thread_time()
        errors = schema_errors(schema, instance)
        spent = time.thread_time() - started
        assert len(errors) <= 50
        # 10 µs of CPU a step, far above a step's cost, and far below a pairwise check's (84 s for 8,000 objects).
        assert spent < 0.5 + 10e-6 * (STEPS_BASE + STEPS_PER_VALUE * values), (spent, schema)

    check()
