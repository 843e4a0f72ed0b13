"""Every route, every role: an explicit table of the minimum role per route and method.

The table must name every route the URL configuration has, so a new route cannot ship unclassified.
Pages: anonymous → 302 to /accounts/login/, a lower role → 403. API: anonymous → 401, a lower role → 403.
"""

import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from simia_web.accounts.services import user_create
from simia_web.audits.services import audit_create
from simia_web.calibration.models import AssignmentBatch, CalibrationRun, CriterionRating, RatingAssignment
from simia_web.catalog.models import Api, Seed, Task
from simia_web.curation.models import Review
from simia_web.environments.models import EnvSession
from simia_web.exports.models import Snapshot
from simia_web.fidelity.models import FidelityRun
from simia_web.jobs.models import Job, JobStatus
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.operations.models import WebhookDelivery, WebhookSubscription
from tests.conftest import PASSWORD
from tests.support.factories import TOOLS, conversation, make_job, make_trajectory, verdict

ANNOTATOR, REVIEWER, CURATOR, ADMIN = "annotator", "reviewer", "curator", "admin"
ROLES = [ANNOTATOR, REVIEWER, CURATOR, ADMIN]
RANK = {ANNOTATOR: 1, REVIEWER: 2, CURATOR: 3, ADMIN: 4}
LOGIN = "/accounts/login/"


@dataclass(frozen=True)
class Route:
    kind: str  # "page" or "api"
    methods: dict[str, str]  # HTTP method → minimum role
    kwargs: dict[str, str] = field(default_factory=dict)  # URL kwarg → key of the `objects` fixture


def page(methods, **kwargs):
    return Route("page", methods, kwargs)


def api(methods, **kwargs):
    return Route("api", methods, kwargs)


# Route name → who may do what. Keep in step with the roles:
# annotator reviews and fixes trajectories; curator queues jobs, edits the catalog, bulk-reviews, exports,
# runs RL environments; admin does everything (users, endpoint profiles and the LLM call log).
ROUTES: dict[str, Route] = {
    # auth (public by design: checked separately below)
    "login": page({}),
    "logout": page({}),
    # the site's icon (public: browsers ask for it before anyone signs in)
    "favicon": page({}),
    # workspace
    "dashboard": page({"GET": ANNOTATOR}),
    "review-queue": page({"GET": ANNOTATOR}),
    "review-bulk": page({"POST": CURATOR}),
    "review-bulk-undo": page({"POST": CURATOR}),
    "trajectory": page({"GET": ANNOTATOR}, pk="trajectory"),
    "trajectory-decide": page({"POST": ANNOTATOR}, pk="trajectory"),
    "review-next": page({"POST": ANNOTATOR}),
    "review-undo": page({"POST": ANNOTATOR}, pk="review"),
    "trajectory-reservation": page({"POST": ANNOTATOR}, pk="trajectory"),
    "trajectory-edit": page({"GET": ANNOTATOR, "POST": ANNOTATOR}, pk="trajectory"),
    "trajectory-draft": page({"POST": ANNOTATOR}, pk="trajectory"),
    "trajectory-check-call": page({"POST": ANNOTATOR}, pk="trajectory"),
    "trajectory-revert": page({"POST": ANNOTATOR}, pk="trajectory"),
    "trajectory-judge": page({"POST": CURATOR}, pk="trajectory"),
    "agreement": page({"GET": ANNOTATOR}),
    # the reviewer stage: reviewers take the second look, annotators read what was overturned
    "reviewer-queue": page({"GET": REVIEWER}),
    "reviewer-confirm-rest": page({"POST": REVIEWER}),
    "overturned-decisions": page({"GET": ANNOTATOR}),
    # gold items: curators mark them; a quality page is curators' (and its own annotator's: tests/curation/test_gold.py)
    "trajectory-gold": page({"POST": CURATOR}, pk="trajectory"),
    "annotator-quality": page({"GET": CURATOR}, pk="colleague"),
    "api-annotator-quality": api({"GET": CURATOR}, pk="colleague"),
    # guidelines: everyone reads, curators write
    "workspace-guidelines": page({"GET": ANNOTATOR, "POST": CURATOR}),
    "domain-guidelines": page({"GET": ANNOTATOR, "POST": CURATOR}, name="domain"),
    "near-duplicate-clusters": page({"GET": ANNOTATOR}),
    "near-duplicate-cluster": page({"GET": ANNOTATOR}, head="trajectory"),
    "near-duplicate-keep": page({"POST": CURATOR}, head="trajectory"),
    "seed-upload": page({"GET": CURATOR, "POST": CURATOR}),
    "export-list": page({"GET": ANNOTATOR, "POST": CURATOR}),
    "export-detail": page({"GET": ANNOTATOR}, pk="snapshot"),
    # catalog: everyone reads, curators edit (the detail pages take the edit as a POST)
    "domain-list": page({"GET": ANNOTATOR}),
    "domain-new": page({"GET": CURATOR, "POST": CURATOR}),
    "api-new": page({"GET": CURATOR, "POST": CURATOR}),
    "task-new": page({"GET": CURATOR, "POST": CURATOR}),
    "domain-detail": page({"GET": ANNOTATOR, "POST": CURATOR}, name="domain"),
    "api-list": page({"GET": ANNOTATOR}),
    "api-detail": page({"GET": ANNOTATOR, "POST": CURATOR}, pk="api"),
    "task-list": page({"GET": ANNOTATOR}),
    "task-detail": page({"GET": ANNOTATOR, "POST": CURATOR}, pk="task"),
    "seed-list": page({"GET": ANNOTATOR}),
    "seed-detail": page({"GET": ANNOTATOR, "POST": CURATOR}, pk="seed"),
    "job-queue": page({"GET": CURATOR, "POST": CURATOR}, slug="kind"),
    # real APIs: imports, the reference environment (a command needs an admin: tested with the feature), fidelity
    "api-import": page({"GET": CURATOR, "POST": CURATOR}),
    "domain-reference": page({"POST": CURATOR}, name="domain"),
    "fidelity-runs": page({"GET": ANNOTATOR}),
    "fidelity-run": page({"GET": ANNOTATOR}, pk="fidelity_run"),
    # judge calibration: annotators rate and read the figures, curators hand items out
    "trajectory-rating": page({"GET": ANNOTATOR, "POST": ANNOTATOR}, pk="trajectory"),
    "calibration": page({"GET": ANNOTATOR}),
    "calibration-run": page({"GET": ANNOTATOR}, pk="calibration_run"),
    "calibration-agreement": page({"GET": ANNOTATOR}),
    "calibration-assigned": page({"GET": ANNOTATOR}),
    "calibration-assignments": page({"GET": CURATOR, "POST": CURATOR}),
    # jobs and the LLM call log
    "job-list": page({"GET": ANNOTATOR}),
    "job-detail": page({"GET": ANNOTATOR}, pk="job"),
    "job-progress": page({"GET": ANNOTATOR}, pk="job"),
    "job-cancel": page({"POST": CURATOR}, pk="job"),
    "job-retry": page({"POST": CURATOR}, pk="job"),
    "llm-call": page({"GET": ADMIN}, pk="call"),  # and the owner of the RL session it served (tested below)
    "llm-endpoints": page({"GET": ADMIN, "POST": ADMIN}),
    "llm-endpoint-new": page({"GET": ADMIN, "POST": ADMIN}),
    "llm-endpoint": page({"GET": ADMIN, "POST": ADMIN}, pk="profile"),
    "llm-endpoint-test": page({"POST": ADMIN}, pk="profile"),
    "llm-endpoint-probe": page({"GET": ADMIN}, pk="profile"),
    # users: admins manage them; the link an invited user sets a password with is public (its token is the key)
    "user-list": page({"GET": ADMIN}),
    "user-new": page({"GET": ADMIN, "POST": ADMIN}),
    "user-edit": page({"GET": ADMIN, "POST": ADMIN}, pk="person"),
    "user-password": page({"POST": ADMIN}, pk="person"),
    "password_reset_confirm": page({}),
    "password_reset_complete": page({}),
    # operations: Prometheus reads /metrics with a bearer token or from an allowed address, never a session
    # (tests/operations/test_metrics.py); /healthz and /readyz are answered by a middleware, before any route
    "metrics": page({}),
    "webhook-list": page({"GET": ADMIN, "POST": ADMIN}),
    "webhook-detail": page({"GET": ADMIN, "POST": ADMIN}, pk="webhook"),
    "webhook-deliveries": page({"GET": ADMIN}, pk="webhook"),
    "webhook-test": page({"POST": ADMIN}, pk="webhook"),
    "webhook-delete": page({"POST": ADMIN}, pk="webhook"),
    "webhook-secret-rotate": page({"POST": ADMIN}, pk="webhook"),
    "webhook-delivery-retry": page({"POST": ADMIN}, pk="delivery"),
    # API documentation
    "api-schema": api({"GET": ANNOTATOR}),
    "api-docs": api({"GET": ANNOTATOR}),
    # audits: annotators decide the sample, curators create audits, switch blind mode and accept the rest
    "audit-list": page({"GET": ANNOTATOR, "POST": CURATOR}),
    "audit-detail": page({"GET": ANNOTATOR}, pk="audit"),
    "audit-next": page({"POST": ANNOTATOR}, pk="audit"),
    "audit-accept-rest": page({"POST": CURATOR}, pk="audit"),
    "audit-blind": page({"POST": CURATOR}, pk="audit"),
    "audit-item": page({"GET": ANNOTATOR}, pk="audit", trajectory_id="trajectory"),
    "audit-item-decide": page({"POST": ANNOTATOR}, pk="audit", trajectory_id="trajectory"),
    "audit-item-release": page({"POST": ANNOTATOR}, pk="audit", trajectory_id="trajectory"),
    "audit-undo": page({"POST": ANNOTATOR}, pk="audit", review_id="review"),
    "api-audit-list": api({"GET": ANNOTATOR, "POST": CURATOR}),
    "api-audit-detail": api({"GET": ANNOTATOR}, pk="audit"),
    "api-audit-items": api({"GET": ANNOTATOR}, pk="audit"),
    "api-audit-accept-rest": api({"POST": CURATOR}, pk="audit"),
    # REST API
    "api-me": api({"GET": ANNOTATOR}),
    # workspaces: members list theirs, site administrators create; a workspace's admins manage its members
    "api-workspaces": api({"GET": ANNOTATOR, "POST": ADMIN}),
    "api-workspace-members": api({"GET": ADMIN, "POST": ADMIN, "DELETE": ADMIN}, slug="workspace"),
    "workspace-switch": page({"POST": ANNOTATOR}),
    # single sign-on: public by design (the provider's answer is checked by the callback)
    "oidc-login": page({}),
    "oidc-callback": page({}),
    # the audit log: admins (their workspaces), site administrators (everything)
    "audit-log": page({"GET": ADMIN}),
    "api-audit-log": api({"GET": ADMIN}),
    "api-domain-list": api({"GET": ANNOTATOR}),
    "api-domain-detail": api({"GET": ANNOTATOR}, name="domain"),
    "api-api-list": api({"GET": ANNOTATOR}),
    "api-api-detail": api({"GET": ANNOTATOR}, pk="api"),
    "api-task-list": api({"GET": ANNOTATOR}),
    "api-task-detail": api({"GET": ANNOTATOR}, pk="task"),
    "api-seed-list": api({"GET": ANNOTATOR}),
    "api-seed-detail": api({"GET": ANNOTATOR}, pk="seed"),
    "api-seed-upload": api({"POST": CURATOR}),
    "api-apis-import": api({"POST": CURATOR}),
    "api-domain-reference": api({"GET": ANNOTATOR, "PUT": CURATOR, "DELETE": CURATOR}, name="domain"),
    "api-domain-guidelines": api({"GET": ANNOTATOR, "PUT": CURATOR}, name="domain"),
    "api-fidelity-run-list": api({"GET": ANNOTATOR}),
    "api-fidelity-run-detail": api({"GET": ANNOTATOR}, pk="fidelity_run"),
    "api-fidelity-run-trajectories": api({"GET": ANNOTATOR}, pk="fidelity_run"),
    "api-fidelity-run-calls": api({"GET": ANNOTATOR}, pk="fidelity_run"),
    "api-rating-list": api({"GET": ANNOTATOR, "POST": ANNOTATOR}),
    "api-rating-detail": api({"GET": ANNOTATOR}, pk="rating"),
    "api-rating-assignment-list": api({"GET": ANNOTATOR, "POST": CURATOR}),
    "api-rating-assignment-detail": api({"GET": ANNOTATOR}, pk="rating_assignment"),
    "api-calibration-run-list": api({"GET": ANNOTATOR}),
    "api-calibration-run-detail": api({"GET": ANNOTATOR}, pk="calibration_run"),
    "api-calibration-run-disagreements": api({"GET": ANNOTATOR}, pk="calibration_run"),
    "api-calibration-run-best": api({"GET": ANNOTATOR}),
    "api-calibration-run-agreement": api({"GET": ANNOTATOR}),
    "api-trajectory-list": api({"GET": ANNOTATOR}),
    "api-trajectory-detail": api({"GET": ANNOTATOR}, pk="trajectory"),
    "api-trajectory-reviews": api({"POST": ANNOTATOR}, pk="trajectory"),
    "api-trajectory-revert": api({"POST": ANNOTATOR}, pk="trajectory"),
    "api-trajectory-gold": api({"GET": CURATOR, "PUT": CURATOR, "DELETE": CURATOR}, pk="trajectory"),
    "api-gold-list": api({"GET": CURATOR}),
    "api-job-list": api({"GET": ANNOTATOR, "POST": CURATOR}),
    "api-job-detail": api({"GET": ANNOTATOR}, pk="job"),
    "api-job-cancel": api({"POST": CURATOR}, pk="job"),
    "api-snapshot-list": api({"GET": ANNOTATOR, "POST": CURATOR}),
    "api-snapshot-detail": api({"GET": ANNOTATOR}, pk="snapshot"),
    "api-snapshot-download": api({"GET": ANNOTATOR}, pk="snapshot"),
    "api-llm-profile-list": api({"GET": ADMIN}),
    "api-llm-profile-detail": api({"GET": ADMIN}, pk="profile"),
    "api-llm-profile-check": api({"POST": ADMIN}, pk="profile"),
    "api-webhook-list": api({"GET": ADMIN, "POST": ADMIN}),
    "api-webhook-detail": api({"GET": ADMIN, "PUT": ADMIN, "PATCH": ADMIN, "DELETE": ADMIN}, pk="webhook"),
    "api-webhook-test": api({"POST": ADMIN}, pk="webhook"),
    "api-webhook-rotate-secret": api({"POST": ADMIN}, pk="webhook"),
    "api-webhook-deliveries": api({"GET": ADMIN}, pk="webhook"),
    "env-list": api({"GET": CURATOR, "POST": CURATOR}),
    "env-detail": api({"GET": CURATOR}, session_id="session"),
    "env-step": api({"POST": CURATOR}, session_id="session"),
    "env-abandon": api({"POST": CURATOR}, session_id="session"),
}


# Routes of the Django admin (users, endpoint profiles): generated per model, protected by the admin site.
ADMIN_NAMESPACE = "admin"


def _walk(resolver, namespace=None):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry, entry.namespace or namespace)
        elif isinstance(entry, URLPattern):
            yield namespace, entry


def _routes():
    return [(namespace, pattern) for namespace, pattern in _walk(get_resolver())]


def _drf_methods(callback) -> set[str] | None:
    """The methods a DRF view answers (None for plain Django views)."""
    if getattr(callback, "actions", None):  # a viewset route
        return {m.upper() for m in callback.actions}
    view_class = getattr(callback, "cls", None)
    if view_class is None:
        return None
    return {m.upper() for m in view_class.http_method_names if m not in ("options", "head") and hasattr(view_class, m)}


def test_every_route_is_classified():
    names = []
    for namespace, pattern in _routes():
        if namespace == ADMIN_NAMESPACE:
            continue
        assert pattern.name, f"route {pattern.pattern} has no name; name it and add it to ROUTES"
        names.append(pattern.name)
    assert len(names) == len(set(names)), "two routes share a name"
    assert set(names) - set(ROUTES) == set(), "new routes: add them to ROUTES with their minimum role"
    assert set(ROUTES) - set(names) == set(), "ROUTES names routes that no longer exist"


def test_api_routes_list_every_method_they_answer():
    """A method added to an API view (say PATCH) must be classified too."""
    for namespace, pattern in _routes():
        route = ROUTES.get(pattern.name)
        if namespace == ADMIN_NAMESPACE or route is None or route.kind != "api":
            continue
        methods = _drf_methods(pattern.callback)
        assert methods is not None, f"{pattern.name} is not a DRF view"
        methods.discard("HEAD")
        assert methods == set(route.methods), (pattern.name, methods)


@pytest.fixture
def objects(db, users):
    return route_objects(users)


def route_objects(users: dict) -> dict:
    """One object of each kind a route's URL names, by the key ROUTES' kwargs use (the route walk uses them too)."""
    job = make_job(status=JobStatus.RUNNING)
    t = make_trajectory(judge=verdict(), job=job)
    audit = audit_create(filters={}, sample_size=1, strategy="uniform", seed=1, actor=users[CURATOR])  # samples t
    domain = t.domain
    task = Task.objects.create(domain=domain, instruction="Cancel W1")
    export_job = Job.objects.create(kind="export", status=JobStatus.QUEUED, params={})
    # Unreachable on purpose: a "send test" in this table must not reach anything.
    webhook = WebhookSubscription.objects.create(name="ops", url="http://127.0.0.1:9/hook", events=["job.failed"])
    return {
        "audit": audit,
        "trajectory": t,
        "review": Review.objects.create(
            trajectory=t, reviewer=users[ANNOTATOR], decision="accept", trajectory_version=1
        ),
        "job": job,
        "domain": domain,
        "api": Api.objects.create(domain=domain, name="cancel_order", parameters=TOOLS[0]["function"]["parameters"]),
        "task": task,
        "seed": Seed.objects.create(domain=domain, source_format="openai", messages=conversation(), tools=TOOLS),
        "call": LLMCall.objects.create(stage="judge", model="m", request_hash="x", request={"messages": []}, job=job),
        "snapshot": Snapshot.objects.create(format="openai", job=export_job, created_by=users[CURATOR]),
        "profile": EndpointProfile.objects.create(name="audit", model="m"),
        "person": users[ANNOTATOR],
        # Another member, whose quality only curators read.
        "colleague": user_create(username="colleague", role=ANNOTATOR, password=PASSWORD),
        "session": EnvSession.objects.create(domain=domain, task=task, created_by=users[CURATOR]),
        "kind": SimpleNamespace(pk="rollouts"),  # a job kind's queue page
        "workspace": SimpleNamespace(pk="default"),  # every user of the table is a member of it
        "webhook": webhook,
        "delivery": WebhookDelivery.objects.create(subscription=webhook, event="ping", payload={}),
        "fidelity_run": FidelityRun.objects.create(domain=domain, reference={"url": "http://127.0.0.1:9/"}, method="s"),
        "calibration_run": CalibrationRun.objects.create(prompt_version="judge-v4", profile_name="audit"),
        "rating": CriterionRating.objects.create(
            trajectory=t, annotator=users[ANNOTATOR], trajectory_version=1, scores={"task_completed": 1.0}
        ),
        # Everyone's: an annotator reads only their own assignments.
        "rating_assignment": RatingAssignment.objects.create(
            batch=AssignmentBatch.objects.create(overlap=1), trajectory=t, annotator=users[ANNOTATOR]
        ),
    }


def route_url(name: str, route: Route, objects: dict) -> str:
    kwargs = {}
    for kwarg, key in route.kwargs.items():
        obj = objects[key]
        kwargs[kwarg] = obj.name if kwarg == "name" else obj.pk
    return reverse(name, kwargs=kwargs)


CASES = [
    pytest.param(name, method, role, id=f"{name}-{method}")
    for name, route in ROUTES.items()
    for method, role in route.methods.items()
]


def _send(client, method: str, url: str):
    return client.generic(method, url, data=b"{}" if method != "GET" else b"", content_type="application/json")


@pytest.mark.parametrize("name,method,needs", CASES)
def test_access(client, users, objects, name, method, needs):
    route = ROUTES[name]
    url = route_url(name, route, objects)

    response = _send(client, method, url)
    if route.kind == "page":
        assert response.status_code == 302, (url, response.status_code)
        assert response["Location"].startswith(LOGIN), response["Location"]
    else:
        assert response.status_code == 401, (url, response.status_code)

    for role in ROLES:
        client.force_login(users[role])
        response = _send(client, method, url)
        if RANK[role] < RANK[needs]:
            assert response.status_code == 403, (url, method, role, response.status_code)
        else:
            assert response.status_code not in (401, 403), (url, method, role, response.status_code)
            location = response.get("Location", "")
            assert not location.startswith(LOGIN), (url, method, role, location)
        client.logout()


def test_token_auth_follows_the_same_roles(client, users, objects):
    """Token clients (the training teams' scripts) get the same answers as sessions."""
    from simia_web.accounts.services import user_token

    annotator = {"HTTP_AUTHORIZATION": f"Token {user_token(user=users[ANNOTATOR])}"}
    assert client.post("/api/v1/jobs/", {}, content_type="application/json", **annotator).status_code == 403
    assert client.post("/api/v1/envs/", {}, content_type="application/json", **annotator).status_code == 403
    assert client.post("/api/v1/snapshots/", {}, content_type="application/json", **annotator).status_code == 403
    assert client.get("/api/v1/trajectories/", **annotator).status_code == 200
    assert client.get("/api/v1/trajectories/", HTTP_AUTHORIZATION="Token nope").status_code == 401


def test_other_curators_env_session_is_not_found(client, users, objects):
    """Sessions are private to whoever started them (admins see all)."""
    from simia_web.accounts.services import user_create
    from tests.conftest import PASSWORD

    other = user_create(username="curator2", role=CURATOR, password=PASSWORD)
    session = objects["session"]
    client.force_login(other)
    assert client.get(f"/api/v1/envs/{session.pk}").status_code == 404
    step = {"message": {"role": "assistant", "content": "Hello"}}
    assert client.post(f"/api/v1/envs/{session.pk}/step", step, content_type="application/json").status_code == 404
    assert client.get(f"/api/v1/envs/{uuid.uuid4()}").status_code == 404
    client.force_login(users[ADMIN])
    assert client.get(f"/api/v1/envs/{session.pk}").status_code == 200


def test_login_and_logout_are_public(client, db):
    assert client.get(LOGIN).status_code == 200
    assert client.post("/accounts/logout/").status_code == 302


@pytest.mark.parametrize("url", ["/admin/", "/admin/accounts/user/", "/admin/llm/endpointprofile/"])
def test_admin_site_is_for_admins_only(client, users, url):
    """Users and endpoint profiles are managed in the Django admin: staff only (admins are staff)."""
    response = client.get(url)
    assert response.status_code == 302 and "/login/" in response["Location"]
    for role in (ANNOTATOR, CURATOR):
        client.force_login(users[role])
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), (role, url)
        client.logout()
    client.force_login(users[ADMIN])
    assert client.get(url).status_code == 200
