"""An example job kind, whole in this module: once its app is installed, the kind is on the queue page, in the REST
API and its schema, and in `manage.py queue`, without a line anywhere else."""

from rest_framework import serializers

from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.parameters import CappedListField
from simia_web.jobs.services import job_create


class EchoJobSerializer(serializers.Serializer):
    """`echo`: one unit per word, each writing the word back."""

    words = CappedListField(
        cap="SIMIA_MAX_UNITS_PER_JOB", child=serializers.CharField(max_length=40), min_length=1, help_text="To echo."
    )

    def create(self, validated_data):
        return job_create(kind="echo", params={"words": validated_data["words"]}, actor=validated_data["actor"])


@job_kind_register
class EchoKind(JobKind):
    kind = "echo"
    label = "Echo words"
    stages = ("echo",)
    parameters = EchoJobSerializer

    def plan(self, job, stage):
        if stage is not None:
            return None
        return "echo", [UnitPlan("echo", f"echo:{i}", {"word": w}) for i, w in enumerate(job.params["words"])]

    def run(self, job, unit):
        return lambda: {"echo": unit.params["word"]}
