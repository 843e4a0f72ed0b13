"""The registry of job kinds: everything about a kind is one object, registered once.

A pipeline is a sequence of stages. Each stage is a set of units; when every unit of a stage
has ended, the pipeline plans the next stage from what the previous one produced. The rest of
the application (the job pages, the REST API, the queue forms, the management commands) finds
a kind's label, parameters and form here and never names a kind itself.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from rest_framework import serializers


@dataclass(frozen=True)
class UnitPlan:
    stage: str
    key: str
    params: dict = field(default_factory=dict)


class Pipeline(Protocol):
    kind: ClassVar[str]
    label: ClassVar[str]
    # The stages in the order they run: progress is shown in this order.
    stages: ClassVar[tuple[str, ...]]
    # The parameters a job of this kind is queued with: one serializer holding the range rules and caps, whose
    # save(actor=...) queues the job. None when the kind is queued by its own app (an export, by its snapshot).
    parameters: ClassVar[type[serializers.Serializer] | None]
    # The queue page's form (a jobs.forms.JobParametersForm); None: no queue page.
    form: ClassVar[type | None]

    def plan(self, job, stage: str | None) -> tuple[str, list[UnitPlan]] | None:
        """Units of the stage after `stage` (None: the first stage); None when the job is complete."""

    def run(self, job, unit) -> Callable[[], dict[str, Any]]:
        """Do the slow work of a unit (LLM calls) and return a function that writes its result.

        The writer runs inside the transaction that marks the unit done, so a unit redelivered
        after a crash or run twice at once writes its result exactly once. A writer may have a
        `discard()` method, called instead when it will not run (cancelled job, unit already done)
        or when it failed, to release what the slow work left behind (a temporary file). A writer that
        stores a failure instead of raising (a judge verdict whose call failed) puts it in its result
        under "error": the unit then counts as ended in an error, in the progress and the job's outcome.
        """

    # A kind whose jobs make something with a page of its own may also have `results_url(job) -> str | None`;
    # the job's page links to it.


_PIPELINES: dict[str, Pipeline] = {}


def pipeline_register(pipeline: Pipeline) -> Pipeline:
    _PIPELINES[pipeline.kind] = pipeline
    return pipeline


def pipeline_for(kind: str) -> Pipeline:
    return _PIPELINES[kind]


def job_kind_choices() -> list[tuple[str, str]]:
    """(kind, label) of every registered kind: the choices of Job.kind and of the job filters."""
    return [(kind, pipeline.label) for kind, pipeline in _PIPELINES.items()]


def queueable_pipelines() -> dict[str, Pipeline]:
    """The kinds a job can be queued for by name (through the API, a command or a page), by kind."""
    return {kind: pipeline for kind, pipeline in _PIPELINES.items() if pipeline.parameters is not None}
