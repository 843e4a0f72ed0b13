"""Writes of the pipelines: a finished trajectory stored with its rule violations and judge verdict, the queue
row's columns derived from its messages, and a verdict recorded when the judge runs again."""

from django.db import transaction

from simia_web.accounts.models import owner_workspace_id
from simia_web.core.jsonutil import content_hash
from simia_web.core.rows import rows_insert
from simia_web.curation.duplicates import TRAJECTORIES
from simia_web.curation.models import JudgeVerdict, RuleViolation, Trajectory, pipeline_status
from simia_web.curation.rollups import RollupChange, rollups_add
from simia_web.curation.selectors.trajectory import HUMAN_STATUSES
from simia_web.dedup.services import item_index
from simia_web.formats.conversation import conversation_text
from simia_web.jobs.models import Job
from simia_web.jobs.services import job_create


def trajectory_status_for(*, violations: list, verdict: dict | None) -> str:
    """Rules first: any unfixed violation fails; then the judge decides; no verdict means generated."""
    return pipeline_status(
        violation_count=sum(1 for v in violations if not v.fixed), judge_passed=(verdict or {}).get("passed")
    )


@transaction.atomic(savepoint=False)
def trajectory_create(*, violations: list, verdict: dict | None = None, **fields) -> Trajectory:
    """Store a finished trajectory with its rule violations and judge verdict.

    `violations` are rules.Violation objects; `verdict` is the judge's answer (see judge.verdict_fields).
    """
    fields.setdefault(
        "content_hash", content_hash({"messages": fields.get("messages", []), "tools": fields.get("tools", [])})
    )
    fields.update(
        conversation_summary(
            messages=fields.get("messages", []), termination_reason=fields.get("termination_reason", "")
        )
    )
    fields.setdefault("model", str((fields.get("provenance") or {}).get("model", ""))[:120])
    # Inserted as fixed SQL (core.rows): every unit of a synthesis job writes them, and the ORM's statements cost
    # a worker more CPU than the rest of the write.
    [trajectory] = rows_insert(
        [
            Trajectory(
                status=trajectory_status_for(violations=violations, verdict=verdict),
                violation_count=sum(1 for v in violations if not v.fixed),
                **_verdict_headline(verdict),
                **fields,
            )
        ]
    )
    rows_insert(
        [
            RuleViolation(
                trajectory=trajectory, code=v.code, message_index=v.message_index, detail=v.detail[:2000], fixed=v.fixed
            )
            for v in violations
        ]
    )
    if verdict is not None:
        rows_insert([JudgeVerdict(trajectory=trajectory, **verdict)])
    _duplicates_index(trajectory, trajectory.messages, new=True)
    # Last: concurrent writers of the same job and domain wait on these rows till commit.
    rollups_add(trajectory, violation_codes=[v.code for v in violations if not v.fixed])
    return trajectory


def _workspace_of(trajectory: Trajectory) -> int:
    """The trajectory's workspace without a read on the pipelines' write path: its job's (a job writes only in its
    own workspace), else its domain's."""
    if Trajectory._meta.get_field("job").is_cached(trajectory) and trajectory.job is not None:
        return owner_workspace_id(trajectory.job)
    return owner_workspace_id(trajectory.domain)


def _duplicates_index(trajectory: Trajectory, messages: list, new: bool = False) -> None:
    """Sign the text in the near-duplicate index (among its workspace's), in the transaction that writes it."""
    item_index(
        corpus=TRAJECTORIES,
        workspace_id=_workspace_of(trajectory),
        item_id=trajectory.pk,
        text=conversation_text(messages or []),
        new=new,
    )


# Rollouts that ended on an error hold no conversation worth a person's time.
ERRORED_TERMINATIONS = frozenset({"llm_error", "internal_error"})
PREVIEW_CHARS = 200


def conversation_summary(*, messages: list, termination_reason: str = "") -> dict:
    """The queue row's columns derived from the messages: preview, turns, tool calls, and whether it is reviewable."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    first_user = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    answered = any(m.get("role") == "assistant" and (m.get("content") or m.get("tool_calls")) for m in messages)
    return {
        "preview": " ".join(str(first_user or "").split())[:PREVIEW_CHARS],
        "turns": sum(1 for m in messages if m.get("role") in ("user", "assistant")),
        "tool_call_count": sum(len(m.get("tool_calls") or []) for m in messages),
        "reviewable": answered and termination_reason not in ERRORED_TERMINATIONS,
    }


def _verdict_headline(verdict: dict | None) -> dict:
    """The verdict numbers the review queue filters and orders on, copied onto the trajectory."""
    if verdict is None:
        return {}
    return {
        "judge_passed": verdict.get("passed"),
        "judge_score": verdict.get("score"),
        "judge_confidence": verdict.get("confidence"),
    }


def verdict_record(*, trajectory_id: int, version: int, verdict: dict) -> JudgeVerdict:
    """Store a judge verdict on `version` of a trajectory (Judge again).

    A failed call (a verdict with `error`) is kept beside the standing verdict and changes nothing else. A verdict
    becomes the headline (queue filters, agreement) only while the text it judged is current, and moves a pipeline
    status; a person's decision stays.
    """
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
        if verdict.get("error"):
            return JudgeVerdict.objects.create(trajectory=trajectory, trajectory_version=version, **verdict)
        # Even a verdict on older text is the latest verdict agreement reads its profile and criteria from.
        change = RollupChange([trajectory.pk])
        record = JudgeVerdict.objects.create(trajectory=trajectory, trajectory_version=version, **verdict)
        if version >= trajectory.text_version:
            fields = _verdict_headline(verdict)
            if trajectory.status not in HUMAN_STATUSES:
                fields["status"] = pipeline_status(
                    violation_count=trajectory.violation_count, judge_passed=verdict.get("passed")
                )
            Trajectory.objects.filter(pk=trajectory.pk).update(**fields)
        change.record()
    return record


# The job kind of curation.job_kinds.judge (found when the application starts).
JUDGE_JOB_KIND = "judge"


def trajectory_judge_again(*, trajectory: Trajectory, actor) -> Job:
    """Queue a judge job for the trajectory's current version, in the trajectory's workspace."""
    workspace_id = Trajectory.objects.filter(pk=trajectory.pk).values_list("domain__workspace_id", flat=True).get()
    return job_create(
        kind=JUDGE_JOB_KIND,
        params={"versions": {str(trajectory.pk): trajectory.version}},
        actor=actor,
        workspace_id=workspace_id,
    )
