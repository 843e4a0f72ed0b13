"""The export job kind: one unit that builds the job's snapshot."""

from simia_web.jobs.pipelines import UnitPlan, pipeline_register

from .models import Snapshot
from .services import EXPORT, snapshot_build


class ExportPipeline:
    kind = EXPORT
    label = "Dataset export"
    stages = ("build",)
    parameters = None  # queued with its snapshot (exports.services.snapshot_create)
    form = None

    def plan(self, job, stage):
        if stage is None:
            snapshot = Snapshot.objects.get(job=job)
            return "build", [UnitPlan("build", f"snapshot:{snapshot.pk}", {"snapshot": snapshot.pk})]
        return None

    def run(self, job, unit):
        return snapshot_build(snapshot=Snapshot.objects.get(pk=unit.params["snapshot"]))


pipeline_register(ExportPipeline())
