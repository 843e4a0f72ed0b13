"""Two workspaces side by side: the review queue, the stream, the dashboard, agreement, bulk actions and the REST API
each show and change only one workspace's trajectories, and a member of both sees each one's in turn after switching.
(tests/accounts/test_workspace_isolation.py walks every route as an outsider; this follows one person across two.)"""

import pytest

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import membership_set, user_create, workspace_create, workspace_switch
from simia_web.catalog.services import domain_ensure
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import (
    review_decide,
    reviews_bulk,
    reviews_bulk_queue,
    trajectory_create,
    trajectory_reserve,
)
from simia_web.formats.conversation import Violation
from simia_web.jobs.models import JobStatus
from tests.conftest import PASSWORD
from tests.support.factories import TOOLS, conversation, verdict


def _items(domain, n: int, *, passed: bool, violations=()) -> list[Trajectory]:
    return [
        trajectory_create(
            violations=[Violation(code, 2, f"{code} detail") for code in violations],
            verdict=verdict(passed=passed),
            kind="rollout",
            domain=domain,
            messages=conversation(f"Please cancel order W{i} in {domain.name}."),
            tools=TOOLS,
        )
        for i in range(n)
    ]


class Two:
    """`default` holds the shop (three items waiting, one accepted), team B the bank (two waiting, with a rule
    broken); `both` curates in both, `b_only` annotates in team B alone."""

    def __init__(self, users):
        self.a = Workspace.objects.get(slug="default")
        self.b = workspace_create(slug="team-b", name="Team B")
        self.shop = domain_ensure(name="shop")
        self.bank = domain_ensure(name="bank", workspace_id=self.b.pk)
        self.a_items = _items(self.shop, 4, passed=True)
        self.b_items = _items(self.bank, 2, passed=False, violations=["unknown_tool"])
        review_decide(trajectory=self.a_items[3], reviewer=users["curator"], decision="accept", expected_version=1)
        self.both = user_create(username="both", role="curator", password=PASSWORD, workspaces=["default", "team-b"])
        self.b_only = user_create(username="b-only", role="annotator", password=PASSWORD, workspaces=["team-b"])

    def switch(self, workspace: Workspace) -> None:
        workspace_switch(user=self.both, workspace=workspace)


@pytest.fixture
def two(users) -> Two:
    return Two(users)


def _queue(client, **params):
    response = client.get("/review/", params)
    assert response.status_code == 200
    return response


def test_the_queue_and_the_dashboard_of_each_workspace_count_only_its_items(client, two):
    client.force_login(two.both)
    queue = _queue(client)
    assert {row.pk for row in queue.context["page"].rows} == {t.pk for t in two.a_items[:3]}
    assert queue.context["domains"] == ["shop"] and queue.context["violation_codes"] == []
    assignees = queue.context["bulk_form"].fields["assignee"].queryset
    assert [p.username for p in assignees] == ["admin", "annotator", "both", "curator", "reviewer"]
    dashboard = client.get("/").context
    assert {value: n for value, _, n in dashboard["counts"] if n} == {"judged_pass": 3, "accepted": 1}
    assert dashboard["agreement"]["total"] == 1 and dashboard["domains"] == ["shop"]

    two.switch(two.b)
    queue = _queue(client)
    assert {row.pk for row in queue.context["page"].rows} == {t.pk for t in two.b_items}
    assert queue.context["domains"] == ["bank"] and queue.context["violation_codes"] == ["unknown_tool"]
    assert [p.username for p in queue.context["bulk_form"].fields["assignee"].queryset] == ["b-only", "both"]
    assert not _queue(client, domain="shop").context["page"].rows  # another workspace's domain names nothing here
    dashboard = client.get("/").context
    assert {value: n for value, _, n in dashboard["counts"] if n} == {"rules_failed": 2}
    assert dashboard["agreement"]["total"] == 0 and dashboard["domains"] == ["bank"]
    body = client.get("/").content.decode()
    assert ">shop<" not in body and ">bank<" in body


def test_an_item_of_the_other_workspace_is_not_found_until_the_member_switches(client, two):
    client.force_login(two.both)
    b_item = two.b_items[0]
    assert client.get(f"/trajectories/{b_item.pk}/").status_code == 404
    decide = {"decision": "reject", "reason": "no", "version": 1}
    assert client.post(f"/trajectories/{b_item.pk}/decide/", decide).status_code == 404
    two.switch(two.b)
    assert client.get(f"/trajectories/{b_item.pk}/").status_code == 200
    assert client.post(f"/trajectories/{b_item.pk}/decide/", decide).status_code == 302
    assert Trajectory.objects.get(pk=b_item.pk).status == TrajectoryStatus.REJECTED
    assert client.get(f"/trajectories/{two.a_items[0].pk}/").status_code == 404


def test_the_review_stream_claims_only_the_current_workspaces_items(client, two, users):
    for item in two.a_items[:3]:  # every waiting shop item is someone else's now
        assert trajectory_reserve(trajectory=item, user=users["annotator"])
    client.force_login(two.both)
    response = client.post("/review/next/")
    assert response.status_code == 302 and response.url == "/review/"  # nothing left here, though the bank waits
    assert not Trajectory.objects.filter(reserved_by=two.both).exists()
    two.switch(two.b)
    response = client.post("/review/next/")
    claimed = Trajectory.objects.get(reserved_by=two.both)
    assert claimed in two.b_items and response.url == f"/trajectories/{claimed.pk}/?stream=1"


def test_a_bulk_decision_in_a_request_or_a_job_decides_only_the_current_workspaces_items(client, two, eager):
    client.force_login(two.both)
    two.switch(two.b)
    every = [t.pk for t in two.a_items + two.b_items]
    bulk = {"action": "reject", "scope": "selected", "ids": every, "query": "status=all", "reason": "bad"}
    assert client.post("/review/bulk/", bulk).status_code == 302
    assert set(Trajectory.objects.filter(status=TrajectoryStatus.REJECTED).values_list("pk", flat=True)) == {
        t.pk for t in two.b_items
    }

    job = reviews_bulk_queue(query="status=all", reviewer=two.both, decision="accept", workspace_id=two.b.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.workspace_id == two.b.pk, job.error
    accepted = Review.objects.filter(bulk=True, decision="accept").values_list("trajectory_id", flat=True)
    assert set(accepted) == {t.pk for t in two.b_items}
    assert Trajectory.objects.filter(pk__in=[t.pk for t in two.a_items[:3]], status="judged_pass").count() == 3


def test_a_bulk_decision_of_another_workspace_cannot_be_undone_from_here(client, two):
    outcome = reviews_bulk(
        trajectories=Trajectory.objects.filter(pk__in=[t.pk for t in two.b_items]),
        reviewer=two.both,
        decision="reject",
        reason="bad",
    )
    client.force_login(two.both)  # working in `default`
    response = client.post("/review/bulk/undo/", {"batch": str(outcome.batch)}, follow=True)
    assert "no such bulk decision" in response.content.decode()
    assert Trajectory.objects.filter(pk__in=[t.pk for t in two.b_items], status="rejected").count() == 2


def test_the_agreement_page_reads_the_current_workspaces_rollups(client, two):
    review_decide(trajectory=two.b_items[0], reviewer=two.both, decision="accept", expected_version=1)
    client.force_login(two.both)
    page = client.get("/agreement/")
    assert page.context["a"]["cells"]["pass_accept"] == 1 and page.context["a"]["cells"]["fail_accept"] == 0
    assert [str(d) for d in page.context["form"].fields["domain"].queryset] == ["shop"]
    assert client.get("/agreement/", {"domain": two.bank.pk}).context["a"]["total"] == 1  # not a choice here
    two.switch(two.b)
    page = client.get("/agreement/")
    assert page.context["a"]["cells"] == {"pass_accept": 0, "pass_reject": 0, "fail_accept": 1, "fail_reject": 0}


def test_the_rest_api_reads_every_workspace_of_the_caller_or_the_one_named(client, two):
    client.force_login(two.both)
    ids = lambda response: {row["id"] for row in response.json()["results"]}  # noqa: E731
    a_ids, b_ids = {t.pk for t in two.a_items}, {t.pk for t in two.b_items}
    assert ids(client.get("/api/v1/trajectories/", {"status": "all"})) == a_ids | b_ids
    assert ids(client.get("/api/v1/trajectories/", {"status": "all", "workspace": "team-b"})) == b_ids
    assert client.get("/api/v1/trajectories/", {"workspace": "nowhere"}).status_code == 400
    b_item = two.b_items[0]
    assert client.get(f"/api/v1/trajectories/{b_item.pk}/").status_code == 200
    assert client.get(f"/api/v1/trajectories/{b_item.pk}/", {"workspace": "default"}).status_code == 404


def test_a_rest_decision_needs_a_role_in_the_items_workspace_not_in_the_current_one(client, two, users):
    b_item = two.b_items[0]
    decision = {"decision": "reject", "reason": "no", "version": 1}
    client.force_login(users["annotator"])  # of `default` only
    url = f"/api/v1/trajectories/{b_item.pk}/reviews/"
    assert client.post(url, decision, content_type="application/json").status_code == 404
    membership_set(workspace=two.b, user=users["annotator"], role="annotator")  # still working in `default`
    assert client.post(url, decision, content_type="application/json").status_code == 201
