"""The registry that connects a job kind to the code that plans and runs its units.

A pipeline is a sequence of stages. Each stage is a set of units; when every unit of a stage
has ended, the pipeline plans the next stage from what the previous one produced.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class UnitPlan:
    stage: str
    key: str
    params: dict = field(default_factory=dict)


class Pipeline(Protocol):
    kind: str

    def plan(self, job, stage: str | None) -> tuple[str, list[UnitPlan]] | None:
        """Units of the stage after `stage` (None: the first stage); None when the job is complete."""

    def run(self, job, unit) -> Callable[[], dict[str, Any]]:
        """Do the slow work of a unit (LLM calls) and return a function that writes its result.

        The writer runs inside the transaction that marks the unit done, so a unit redelivered
        after a crash or run twice at once writes its result exactly once. A writer may have a
        `discard()` method, called instead when it will not run (cancelled job, unit already done)
        or when it failed, to release what the slow work left behind (a temporary file).
        """


_PIPELINES: dict[str, Pipeline] = {}


def pipeline_register(pipeline: Pipeline) -> Pipeline:
    _PIPELINES[pipeline.kind] = pipeline
    return pipeline


def pipeline_for(kind: str) -> Pipeline:
    return _PIPELINES[kind]
