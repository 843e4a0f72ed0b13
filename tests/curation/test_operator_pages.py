"""Operator pages: seed upload, exports (create, list, download), live job pages, charts, error pages."""

import hashlib
import json

from django.core.files.uploadedfile import SimpleUploadedFile

from simia_web.catalog.models import Seed
from simia_web.curation.models import Trajectory
from simia_web.exports.models import Snapshot
from simia_web.jobs.models import JobStatus, JobUnit, UnitStatus
from simia_web.llm.models import EndpointProfile, LLMCall
from tests.catalog.test_import import openai_record, sharegpt_record
from tests.support.factories import make_job, make_trajectory, verdict


def test_seed_upload_imports_and_shows_the_importers_errors(client_for):
    client = client_for("curator")
    assert "data-dropzone" in client.get("/seeds/upload/").content.decode()
    good = "".join(json.dumps(openai_record(n)) + "\n" for n in range(3))
    response = client.post(
        "/seeds/upload/",
        {"file": SimpleUploadedFile("orders.jsonl", good.encode()), "format": "openai", "domain": "shop"},
    )
    assert response.status_code == 200 and "Imported into domain &#x27;shop&#x27;" in response.content.decode()
    assert Seed.objects.count() == 3
    bad = sharegpt_record(2)
    bad["conversations"][1]["value"] = "{not json"
    response = client.post(
        "/seeds/upload/",
        {
            "file": SimpleUploadedFile("apigen.json", json.dumps([sharegpt_record(1), bad]).encode()),
            "format": "sharegpt",
        },
    )
    body = response.content.decode()
    assert response.status_code == 400 and "Import refused: 1 problem" in body and "conversations[1].value" in body
    assert Seed.objects.count() == 3
    assert client_for("annotator").get("/seeds/upload/").status_code == 403


def test_exports_page_builds_lists_and_downloads(client_for, eager):
    accepted = make_trajectory(judge=verdict())
    Trajectory.objects.filter(pk=accepted.pk).update(status="accepted")
    make_trajectory(judge=verdict())  # not accepted: not exported by default
    client = client_for("curator")
    body = client.get("/exports/").content.decode()
    assert 'id="export-matching">1<' in body
    response = client.post("/exports/", {"format": "openai", "status": "accepted"})
    assert response.status_code == 302
    snapshot = Snapshot.objects.get()
    assert snapshot.is_built and snapshot.count == 1 and snapshot.created_by.username == "curator"
    body = client.get("/exports/").content.decode()
    assert snapshot.sha256[:10] in body and f"/api/v1/snapshots/{snapshot.pk}/download/" in body
    download = client.get(f"/api/v1/snapshots/{snapshot.pk}/download/")
    assert hashlib.sha256(b"".join(download.streaming_content)).hexdigest() == snapshot.sha256
    job_page = client.get(f"/jobs/{snapshot.job_id}/").content.decode()
    assert 'id="job-snapshot"' in job_page and "Download" in job_page and "None yet" not in job_page
    response = client.post("/exports/", {"format": "openai", "status": "nonsense"})
    assert response.status_code == 400 and "Unknown status nonsense" in response.content.decode()
    assert client_for("annotator").post("/exports/", {"format": "openai"}).status_code == 403


def test_failed_job_page_names_the_cause_and_endpoint(client_for):
    job = make_job(status=JobStatus.FAILED, kind="rollout")
    job.error = "no unit of the last stage succeeded"
    job.save()
    JobUnit.objects.create(job=job, stage="rollout", key="r1", status=UnitStatus.FAILED, params={})
    profile = EndpointProfile.objects.create(name="local", base_url="http://127.0.0.1:9/v1", model="m")
    LLMCall.objects.create(
        stage="agent",
        profile=profile,
        model="m",
        job=job,
        request_hash="x",
        request={},
        error="Connection refused",
        error_kind="connection",
    )
    client = client_for("curator")
    body = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-status">failed<' in body and "Cancel job" not in body and "Retry" in body
    assert "http://127.0.0.1:9/v1" in body and "Connection refused" in body and "OPENAI_BASE_URL" in body
    assert '<progress class="failed"' in body
    head = client.get(f"/jobs/{job.pk}/progress/", {"part": "head"})
    assert head.status_code == 286 and 'id="job-status">failed<' in head.content.decode()


def test_running_job_header_polls(client_for):
    job = make_job(status=JobStatus.RUNNING)
    body = client_for("curator").get(f"/jobs/{job.pk}/").content.decode()
    assert f'hx-get="/jobs/{job.pk}/progress/?part=head"' in body and "Cancel job" in body


def test_dashboard_charts(client_for, users):
    from simia_web.curation.services import review_decide

    t = make_trajectory(judge=verdict(passed=False, score=0.25))
    make_trajectory("bank", judge=verdict(passed=True, score=0.95))
    review_decide(trajectory=t, reviewer=users["annotator"], decision="reject", reason="no", expected_version=1)
    body = client_for("annotator").get("/").content.decode()
    for chart in ("chart-progress", "chart-throughput", "chart-scores", "chart-verdicts"):
        assert f'id="{chart}"' in body
    assert "<svg" in body and "annotator" in body and 'style="' not in body
    assert Trajectory.objects.count() == 2


def test_styled_error_pages(client_for, settings):
    settings.DEBUG = False
    client = client_for("annotator")
    response = client.get("/trajectories/999999/")
    assert response.status_code == 404 and "Nothing here" in response.content.decode()
    response = client.get("/seeds/upload/")
    assert response.status_code == 403 and "You don't have access" in response.content.decode()


def test_judge_again_scores_the_current_version(client_for, users, eager, llm_stub):
    from simia_web.curation.models import JudgeVerdict
    from simia_web.curation.services import trajectory_edit

    t = make_trajectory(judge=verdict(passed=False, score=0.2))
    edited = [dict(m) for m in t.messages]
    edited[4]["content"] = "Order W1 is cancelled; you will get an email."
    trajectory_edit(trajectory=t, editor=users["annotator"], messages=edited, expected_version=1)
    client = client_for("curator")
    assert 'id="verdict-stale"' in client.get(f"/trajectories/{t.pk}/").content.decode()
    response = client.post(f"/trajectories/{t.pk}/judge/", follow=True)
    assert "Judging version 2: job" in response.content.decode()
    latest = JudgeVerdict.objects.filter(trajectory=t).order_by("-id").first()
    assert latest.trajectory_version == 2 and latest.model == "stub-model" and not latest.error
    t.refresh_from_db()
    assert t.judge_score == latest.score
    body = client.get(f"/trajectories/{t.pk}/").content.decode()
    assert "On version 2" in body and 'id="verdict-stale"' not in body and "Earlier, v1" in body
    assert client_for("annotator").post(f"/trajectories/{t.pk}/judge/").status_code == 403


def test_judge_button_says_again_only_for_text_the_judge_has_judged(client_for, users):
    """The button says "again" only where the standing verdict judged the current text."""
    from simia_web.curation.models import JudgeVerdict
    from simia_web.curation.services import trajectory_edit

    def button(t):
        body = client_for("curator").get(f"/trajectories/{t.pk}/").content.decode()
        form = body[body.index('id="judge-again"') :]
        return form[form.index("<button") : form.index("</button>")].split(">", 1)[1]

    never = make_trajectory()
    assert button(never) == "Judge version 1"
    judged = make_trajectory(judge=verdict(passed=True, score=0.9))
    assert button(judged) == "Judge version 1 again"
    # A failed judge call is not a verdict.
    JudgeVerdict.objects.create(trajectory=never, trajectory_version=1, error="timed out")
    assert button(never) == "Judge version 1"
    # After an edit, the verdict is on older text: version 2 was never judged.
    edited = [dict(m) for m in judged.messages]
    edited[4]["content"] = "Order W1 is cancelled."
    trajectory_edit(trajectory=judged, editor=users["annotator"], messages=edited, expected_version=1)
    assert button(judged) == "Judge version 2"


def test_queue_labels_the_judges_confidence_apart_from_its_score(client_for):
    t = make_trajectory(judge=verdict(passed=False, score=0.3, confidence=0.95))
    body = client_for("annotator").get("/review/").content.decode()
    assert ">Judge (confidence)</th>" in body
    row = body[body.index(f'data-href="/trajectories/{t.pk}/') :]
    assert '<span class="bad">fail</span> <span class="muted small" title="confidence">(0.95)</span>' in row
    assert '<td class="num">0.30</td>' in row


def test_dashboard_score_chart_for_one_domain_or_job(client_for):
    job = make_job()
    make_trajectory(judge=verdict(score=0.15), job=job)
    make_trajectory("bank", judge=verdict(score=0.95))
    client = client_for("annotator")
    assert client.get("/", {"domain": "bank"}).context["score_chart"]["total"] == 1
    bars = client.get("/", {"job": job.pk}).context["score_chart"]["bars"]
    assert [b["n"] for b in bars][1] == 1 and sum(b["n"] for b in bars) == 1
