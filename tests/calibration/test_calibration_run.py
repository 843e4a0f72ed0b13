"""A calibration run: the judge in one configuration over the rated items, its answers kept apart from the
trajectories' verdicts, garbage answers recorded with their reason, and its figures on a fixed labelled set checked
against values computed by hand; the best-calibrated configuration."""

import pytest

from simia_web.calibration.models import CalibrationAnswer, CalibrationRun
from simia_web.calibration.selectors import best_calibrated
from simia_web.calibration.services import calibration_job_create, rating_save
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import JudgeVerdict, Trajectory
from simia_web.jobs.models import Job, JobStatus
from simia_web.llm.models import EndpointProfile
from simia_web.simulation.judge import CRITERIA, PROMPT_VERSION, RUBRIC_PROMPT_VERSION
from simia_web.synthesis.services import amplification_queue
from tests.support.factories import conversation, make_trajectory, verdict
from tests.support.llm_stub import Reply
from tests.synthesis.test_amplify import conversation as amplify_conversation
from tests.synthesis.test_amplify import script as amplify_script
from tests.synthesis.test_amplify import seed  # noqa: F401 (the fixture)


def full(value: float, **overrides) -> dict:
    return {**dict.fromkeys(CRITERIA, value), **overrides}


# People: item 1 rated 0.9 by one person, item 2 0.3 and 0.5 by two (mean 0.4), item 3 0.5, item 4 0.0.
RATINGS = {1: [0.9], 2: [0.3, 0.5], 3: [0.5], 4: [0.0]}
# The judge with the plain prompt: task_completed 1.0, 0.8, 0.3, the other criteria as people rated; item 4 gets
# an answer that is not JSON. With the rubric prompt every item gets an answer, and item 1 a "fail".
PLAIN = {
    1: (full(0.9, task_completed=1.0), True),
    2: (full(0.4, task_completed=0.8), True),
    3: (full(0.5, task_completed=0.3), False),
}
RUBRIC = {1: (full(0.9), False), 2: (full(0.4), False), 3: (full(0.5), False), 4: (full(0.0), False)}


def answer(scores, passed):
    return Reply(
        content={"scores": scores, "passed": passed, "confidence": 0.8, "rationale": "r", "cited_messages": []}
    )


def judge_script(items: dict[str, int]):
    def respond(request):
        if request.stage != "judge":
            return Reply(status=500, error_message="only the judge is called")
        text = " ".join(str(m.get("content")) for m in request.messages)  # a repair request quotes the first
        item = next(n for marker, n in items.items() if marker in text)
        answers = RUBRIC if "Criteria:" in request.messages[0]["content"] else PLAIN
        if item not in answers:
            return Reply(content="Sure! The conversation looks fine to me.")
        return answer(*answers[item])

    return respond


@pytest.fixture
def labelled(eager, llm_stub, users):
    items = {}
    for n, grades in RATINGS.items():
        t = make_trajectory(judge=verdict(passed=True, score=0.9), messages=conversation(f"Cancel order ITEM-{n}-X."))
        items[f"ITEM-{n}-X"] = t.pk
        for grade, person in zip(grades, (users["annotator"], users["curator"]), strict=False):
            rating_save(trajectory_id=t.pk, annotator=person, text_version=1, scores=full(grade))
    llm_stub.responder = judge_script({marker: n for n, marker in enumerate(items, start=1)})
    return items


def test_a_run_stores_answers_apart_and_its_figures_match_the_hand_computed_ones(labelled, users, client_for):
    verdicts_before = list(JudgeVerdict.objects.order_by("id").values_list("id", "passed"))

    job = calibration_job_create(prompt_version=PROMPT_VERSION, actor=users["curator"])
    job.refresh_from_db()
    run = CalibrationRun.objects.get(job=job)

    assert job.status == JobStatus.FINISHED_WITH_ERRORS, (job.status, job.error)
    garbage = CalibrationAnswer.objects.get(run=run, trajectory_id=labelled["ITEM-4-X"])
    assert garbage.error and not garbage.scores and garbage.passed is None
    assert list(JudgeVerdict.objects.order_by("id").values_list("id", "passed")) == verdicts_before
    assert set(Trajectory.objects.values_list("judge_passed", flat=True)) == {True}

    figures = run.summary["figures"]
    assert run.summary["items"] == 3 and run.summary["failed"] == 1
    task = figures["task_completed"]
    # Judge pass/fail at 0.7: T T F; people (1.0 vs 0.9, 0.8 vs 0.4, 0.3 vs 0.5): T F F.
    assert task["confusion"] == {"pass_pass": 1, "pass_fail": 1, "fail_pass": 0, "fail_fail": 1}
    assert task["accuracy"] == pytest.approx(2 / 3)
    # po = 2/3, pe = (2*1 + 1*2)/9 = 4/9: kappa = (2/9)/(5/9) = 0.4.
    assert task["kappa"] == pytest.approx(0.4)
    assert figures["policy_followed"]["accuracy"] == 1.0 and figures["policy_followed"]["alpha"] == pytest.approx(1.0)
    # The verdict: item 1 averages 0.92 and passes, item 2 averages 0.48 and fails whatever the judge said, item 3
    # fails; people: 0.9 passes, 0.4 and 0.5 fail.
    assert figures["passed"]["accuracy"] == 1.0 and figures["passed"]["kappa"] == pytest.approx(1.0)

    assert run.summary["disagreement_count"] == 1
    split = client_for("annotator").get(f"/api/v1/calibration/runs/{run.pk}/disagreements/").json()
    assert [(row["trajectory"], [c["criterion"] for c in row["criteria"]]) for row in split] == [
        (labelled["ITEM-2-X"], ["task_completed"])
    ]

    page = client_for("annotator").get(f"/calibration/runs/{run.pk}/").content.decode()
    assert 'id="in-use">judge-v4 × stub<' in page
    assert "0.400" in page and f'href="/trajectories/{labelled["ITEM-2-X"]}/"' in page  # a disagreement
    assert "no usable answer" in page
    job_page = client_for("curator").get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/calibration/runs/{run.pk}/" id="job-results"' in job_page
    assert client_for("curator").get("/queue/calibrate/").status_code == 200


def test_the_best_calibrated_configuration_is_the_one_whose_verdicts_agree_most(labelled, users):
    plain = calibration_job_create(prompt_version=PROMPT_VERSION, actor=users["curator"])
    rubric = calibration_job_create(prompt_version=RUBRIC_PROMPT_VERSION, actor=users["curator"])
    rubric_run = CalibrationRun.objects.get(job=rubric)
    # The rubric run fails every verdict; people pass item 1: po = 3/4, pe = 3/4, kappa 0.
    assert rubric_run.summary["figures"]["passed"]["kappa"] == pytest.approx(0.0)
    assert rubric_run.summary["failed"] == 0
    assert best_calibrated() == CalibrationRun.objects.get(job=plain)


def test_a_judging_job_told_to_use_the_best_calibrated_configuration_judges_with_it(labelled, llm_stub, users, seed):  # noqa: F811
    with pytest.raises(ValidationFailed, match="no calibration run has finished"):
        amplification_queue(count=1, judge_configuration="best_calibrated")
    calibration_job_create(prompt_version=RUBRIC_PROMPT_VERSION, actor=users["curator"])
    other = EndpointProfile.objects.create(name="other", base_url=llm_stub.url, model="stub-model")
    CalibrationRun.objects.update(profile=other, profile_name=other.name)

    systems = []
    amplify = amplify_script({0: amplify_conversation(0)})

    def respond(request):
        if request.stage != "judge":
            return amplify(request)
        systems.append(request.messages[0]["content"])
        return answer(full(0.9), True)

    llm_stub.responder = respond
    job = amplification_queue(count=1, judge_configuration="best_calibrated")
    job.refresh_from_db()
    assert job.params["judge_prompt"] == RUBRIC_PROMPT_VERSION and job.params["profiles"] == {"judge": other.pk}
    assert systems and all("Criteria:" in system for system in systems)
    judged = JudgeVerdict.objects.get(trajectory__job=job)
    assert judged.profile == other and judged.llm_call.prompt_version == RUBRIC_PROMPT_VERSION


def test_the_queue_pages_of_judging_kinds_offer_the_best_calibrated_judge(labelled, users, client_for, seed):  # noqa: F811
    curator = client_for("curator")
    amplify = {"count": 1, "strategy": "round_robin", "min_messages": 2, "max_messages": 40}
    page = curator.get("/queue/amplify/").content.decode()
    assert '<label for="id_judge_configuration">Judge:</label>' in page
    assert "The best-calibrated prompt and endpoint (no calibration run has finished yet)" in page
    refused = curator.post("/queue/amplify/", {**amplify, "judge_configuration": "best_calibrated"})
    assert refused.status_code == 400 and "no calibration run has finished" in refused.content.decode()
    assert not Job.objects.filter(kind="amplify").exists()  # refused as the API refuses it: nothing written

    calibration_job_create(prompt_version=PROMPT_VERSION, actor=users["curator"])
    run = CalibrationRun.objects.get()
    described = f"The best-calibrated prompt and endpoint ({PROMPT_VERSION} × stub, kappa 1.00, run {run.pk})"
    for slug in ("synthesis", "rollouts", "amplify"):
        page = curator.get(f"/queue/{slug}/").content.decode()
        assert f'<option value="best_calibrated">{described}</option>' in page, slug
        assert '<option value="route" selected>The configured judge' in page, slug  # the serializer's default
        assert 'name="profiles__judge"' in page and "null</textarea>" not in page, slug  # a list per stage

    queued = curator.post("/queue/amplify/", {**amplify, "judge_configuration": "best_calibrated"})
    assert queued.status_code == 302
    job = Job.objects.get(kind="amplify")
    assert job.params["judge_prompt"] == PROMPT_VERSION and job.params["profiles"] == {"judge": run.profile_id}
