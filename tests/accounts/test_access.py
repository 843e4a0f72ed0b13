"""Every page: anonymous visitors go to the login page, a role below the page's gets 403, the rest 200."""

import pytest

from simia_web.catalog.models import Api, Seed, Task
from simia_web.llm.models import LLMCall
from tests.support.factories import TOOLS, conversation, make_job, make_trajectory, verdict

ROLES = ["annotator", "curator", "admin"]
RANK = {"annotator": 1, "curator": 2, "admin": 3}


@pytest.fixture
def objects(db):
    job = make_job()
    t = make_trajectory(judge=verdict(), job=job)
    api = Api.objects.create(domain=t.domain, name="cancel_order", parameters=TOOLS[0]["function"]["parameters"])
    task = Task.objects.create(domain=t.domain, instruction="Cancel W1")
    seed = Seed.objects.create(domain=t.domain, source_format="openai", messages=conversation(), tools=TOOLS)
    call = LLMCall.objects.create(stage="judge", model="m", request_hash="x", request={"messages": []}, job=job)
    return {"t": t, "job": job, "api": api, "task": task, "seed": seed, "call": call, "domain": t.domain}


PAGES = [
    ("/", "annotator"),
    ("/review/", "annotator"),
    ("/trajectories/{t.pk}/", "annotator"),
    ("/agreement/", "annotator"),
    ("/jobs/", "annotator"),
    ("/jobs/{job.pk}/", "annotator"),
    ("/jobs/{job.pk}/progress/", "annotator"),
    ("/llm/calls/{call.pk}/", "admin"),  # or the owner of the RL session it served
    ("/domains/", "annotator"),
    ("/domains/{domain.name}/", "annotator"),
    ("/apis/", "annotator"),
    ("/apis/{api.pk}/", "annotator"),
    ("/tasks/", "annotator"),
    ("/tasks/{task.pk}/", "annotator"),
    ("/seeds/", "annotator"),
    ("/seeds/{seed.pk}/", "annotator"),
    ("/queue/synthesis/", "curator"),
    ("/queue/rollouts/", "curator"),
    ("/queue/amplify/", "curator"),
]

POSTS = [
    ("/review/bulk/", "curator"),
    ("/trajectories/{t.pk}/decide/", "annotator"),
    ("/jobs/{job.pk}/cancel/", "curator"),
    ("/jobs/{job.pk}/retry/", "curator"),
]


@pytest.mark.parametrize("url,needs", PAGES)
def test_pages_by_role(client, users, objects, url, needs):
    url = url.format(**objects)
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    for role in ROLES:
        client.force_login(users[role])
        response = client.get(url)
        expected = 200 if RANK[role] >= RANK[needs] else 403
        assert response.status_code == expected, (url, role, response.status_code)


@pytest.mark.parametrize("url,needs", POSTS)
def test_posts_by_role(client, users, objects, url, needs):
    url = url.format(**objects)
    response = client.post(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    for role in ROLES:
        if RANK[role] < RANK[needs]:
            client.force_login(users[role])
            assert client.post(url).status_code == 403


def test_annotator_cannot_post_catalog_edits(client_for, objects):
    client = client_for("annotator")
    api = objects["api"]
    response = client.post(f"/apis/{api.pk}/", {"version": api.version, "description": "x", "kind": "read"})
    assert response.status_code == 403
    assert "Save" not in client.get(f"/apis/{api.pk}/").content.decode()
