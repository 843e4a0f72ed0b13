"""The export job kind: one unit that builds the job's snapshot, then, when its options ask, one that publishes it
to the Hugging Face Hub. Its job page shows the snapshot; the API's job summary names it."""

from functools import partial

from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.leases import unit_progress

from .hub import FAILED
from .models import Snapshot
from .services import EXPORT, snapshot_build, snapshot_hub_record, snapshot_publish

BUILD, PUBLISH = "build", "publish"
# What a build's progress counts: the records its gate has handled, of those matching the snapshot's filters (less
# the near-duplicates it drops).
BUILD_COUNTS = "records written or left out"


@job_kind_register
class ExportKind(JobKind):
    kind = EXPORT
    label = "Dataset export"
    stages = (BUILD, PUBLISH)
    parameters = None  # queued with its snapshot (exports.services.snapshot_create)
    result_template = "exports/_job_snapshot.html"

    def plan(self, job, stage):
        snapshot = Snapshot.objects.get(job=job)
        if stage is None:
            return BUILD, [UnitPlan(BUILD, f"snapshot:{snapshot.pk}", {"snapshot": snapshot.pk})]
        if stage == BUILD and snapshot.options.get("push_to_hub") and snapshot.is_built:
            return PUBLISH, [UnitPlan(PUBLISH, f"publish:{snapshot.pk}", {"snapshot": snapshot.pk})]
        return None

    def run(self, job, unit):
        snapshot = Snapshot.objects.get(pk=unit.params["snapshot"])
        if unit.stage == BUILD:
            progress = partial(unit_progress, unit.pk, what=BUILD_COUNTS, doing=f"Building snapshot {snapshot.pk}")
            return snapshot_build(snapshot=snapshot, progress=progress)
        outcome = snapshot_publish(snapshot=snapshot)  # the network call, before the writer's transaction

        def record() -> dict:
            snapshot_hub_record(snapshot=snapshot, outcome=outcome)
            result = {"snapshot": snapshot.pk, "hub": outcome["status"], "detail": outcome["detail"]}
            return {**result, "error": outcome["detail"]} if outcome["status"] == FAILED else result

        return record

    def summary(self, job) -> dict:
        snapshot = Snapshot.objects.filter(job=job).only("count", "refused_count", "bytes", "sha256").first()
        if snapshot is None:
            return {}
        return {
            "snapshot": snapshot.pk,
            "built": snapshot.is_built,
            "records": snapshot.count,
            "left_out": snapshot.refused_count,
            "bytes": snapshot.bytes,
            "sha256": snapshot.sha256,
        }
