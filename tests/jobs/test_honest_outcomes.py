"""A job says what happened: units whose LLM calls failed are errors, never "done", and the job page counts the
LLM call rows recorded for the job and keeps what it shows up to date until the job ends."""

import re

from simia_web.curation.models import JudgeVerdict, Trajectory, TrajectoryStatus
from simia_web.curation.services import trajectory_judge_again
from simia_web.jobs.models import JobStatus, JobUnit, UnitStatus
from simia_web.jobs.selectors import job_progress
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.llm.selectors import profile_cache_clear
from simia_web.synthesis.services import amplification_queue
from tests.support.factories import make_job, make_trajectory, verdict
from tests.support.llm_stub import Reply
from tests.synthesis.test_amplify import seed  # noqa: F401 (the fixture)

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, every connection is refused


def _counts(body: str) -> str:
    """The progress line of the (only) stage, as text."""
    return " ".join(re.sub(r"<[^>]+>", "", body.split('<span class="counts">', 1)[1].split("</div>", 1)[0]).split())


def test_judge_again_with_an_unreachable_endpoint_fails_the_job(eager, llm_stub, client_for, users):
    EndpointProfile.objects.filter(pk=llm_stub.profile.pk).update(base_url=UNREACHABLE)
    profile_cache_clear()
    trajectory = make_trajectory(judge=verdict(passed=True, score=0.9))

    job = trajectory_judge_again(trajectory=trajectory, actor=users["curator"])
    job.refresh_from_db()

    assert job.status == JobStatus.FAILED, (job.status, job.error)
    assert job.error.startswith(f"connection_error: could not reach {UNREACHABLE}")
    assert job.error.endswith("all 1 units of its judge stage failed or ended in an error)")
    assert job_progress(job) == {
        "judge": {"total": 1, "pending": 0, "done": 0, "failed": 0, "cancelled": 0, "errored": 1}
    }
    unit = JobUnit.objects.get(job=job)
    assert unit.status == UnitStatus.DONE and unit.result["error"].startswith("connection_error")
    failed = JudgeVerdict.objects.get(pk=unit.result["verdict"])
    assert failed.error and failed.trajectory_id == trajectory.pk  # stored beside the verdicts it did not replace
    calls = LLMCall.objects.filter(job=job)
    assert calls.count() > 0 and set(calls.values_list("error_kind", flat=True)) == {"connection_error"}

    body = client_for("curator").get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-status">failed<' in body and '<progress class="failed"' in body
    assert _counts(body) == "0/1 done, 1 errored"
    assert f'id="job-llm-calls">{calls.count()}<' in body
    assert job.summary["units"] == {"errored": 1} and job.summary["llm_calls"] == calls.count()


def test_an_amplification_whose_units_all_errored_shows_errors_and_its_trajectories(seed, llm_stub, client_for):  # noqa: F811
    llm_stub.responder = lambda request: Reply(status=500, error_message="down")

    job = amplification_queue(count=10)
    job.refresh_from_db()

    assert job.status == JobStatus.FAILED
    assert job_progress(job)["amplify"] == {
        "total": 10,
        "pending": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
        "errored": 10,
    }
    body = client_for("curator").get(f"/jobs/{job.pk}/").content.decode()
    assert '<progress class="failed"' in body and '<progress class="ok"' not in body
    assert _counts(body) == "0/10 done, 10 errored"
    trajectories = body.split('id="job-trajectories"', 1)[1].split("</section>", 1)[0]
    assert "None" not in trajectories and f"status={TrajectoryStatus.RULES_FAILED}" in trajectories
    assert '<td class="num">10</td>' in trajectories
    assert Trajectory.objects.filter(job=job, termination_reason="llm_error").count() == 10
    assert f'id="job-llm-calls">{LLMCall.objects.filter(job=job).count()}<' in body


def test_a_stage_partly_errored_is_drawn_as_partly_failed(client_for):
    job = make_job(status=JobStatus.FINISHED_WITH_ERRORS)
    for i in range(3):
        JobUnit.objects.create(job=job, stage="rollout", key=f"ok{i}", status=UnitStatus.DONE)
    # The unit stored a trajectory that an LLM error cut short, and said so in its result.
    errored = JobUnit.objects.create(
        job=job, stage="rollout", key="bad", status=UnitStatus.DONE, result={"error": "agent: timeout"}
    )
    make_trajectory(job=job, unit=errored, termination_reason="llm_error")

    body = client_for("annotator").get(f"/jobs/{job.pk}/").content.decode()

    assert '<progress class="partial"' in body and _counts(body) == "3/4 done, 1 errored"


def test_the_live_part_of_a_job_page_carries_usage_and_what_it_made(client_for):
    job = make_job(status=JobStatus.RUNNING)
    unit = JobUnit.objects.create(job=job, stage="rollout", key="a")
    client = client_for("curator")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-llm-calls">0<' in page and "None yet." in page
    assert f'hx-get="/jobs/{job.pk}/progress/?part=head"' in page

    # The job makes its calls and its trajectory, then ends: the page polls its head and must see all of it.
    for _ in range(3):
        LLMCall.objects.create(stage="agent", model="m", job=job, request_hash="h", request={})
    make_trajectory(job=job, unit=unit)
    JobUnit.objects.filter(pk=unit.pk).update(status=UnitStatus.DONE)
    job.status = JobStatus.SUCCEEDED
    job.save(update_fields=["status"])

    head = client.get(f"/jobs/{job.pk}/progress/", {"part": "head"})
    body = head.content.decode()
    assert head.status_code == 286  # the last swap: polling stops with it
    assert 'id="job-llm-calls">3<' in body and "None yet." not in body
    assert 'id="job-trajectories"' in body and 'id="job-calls"' in body
    assert body.count('<span class="ok">ok</span>') == 3
