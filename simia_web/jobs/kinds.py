"""Job kinds: the protocol every kind follows, and the registry the rest of the application reads.

A kind is one module: a JobKind subclass registered with @job_kind_register, in an app's `job_kinds` module or in
any module of its `job_kinds` package. They are found when the application starts (JobsConfig.ready calls
job_kinds_discover), so no app names its kinds anywhere else. The job pages, the queue pages, the REST API and its
schema and `manage.py queue` read a kind's label, parameters, form, outcome, summary and result panel here, and
never name a kind themselves.

A kind's job is a sequence of stages. Each stage is a set of units; when every unit of a stage has ended, the kind
plans the next stage from what the previous one produced.
"""

import pkgutil
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, ClassVar

from django import forms
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules
from rest_framework import serializers

# The longest kind name and stage name the job tables hold (Job.kind and JobUnit.stage are this long): a kind whose
# name or stages would not fit is refused when it registers, not when its first job is written.
KIND_MAX_LENGTH = 64
STAGE_MAX_LENGTH = 32
# A kind's name and its queue page's address are slugs: they go in URLs, query strings and command lines.
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
DISCOVERED_MODULE = "job_kinds"


@dataclass(frozen=True)
class UnitPlan:
    stage: str
    key: str
    params: dict = field(default_factory=dict)


def id_range_units(stage: str, ids: Iterable[int], per_unit: int) -> list[UnitPlan]:
    """Units of `stage` over `ids` (ascending), about `per_unit` of them each, as ranges [`from`, `to`) of ids that
    meet, the last to just past the last id: an item that comes between two ids read falls in one of them, and none
    past the end. No units of no ids."""
    starts, last = [], None
    for count, pk in enumerate(ids):
        if count % per_unit == 0:
            starts.append(pk)
        last = pk
    if last is None:
        return []
    ends = [*starts[1:], last + 1]
    return [
        UnitPlan(stage, f"ids:{start}", {"from": start, "to": end}) for start, end in zip(starts, ends, strict=True)
    ]


@dataclass(frozen=True)
class Shortfalls:
    """What a job made that falls short, beyond its units' own failures and errors (see jobs.selectors.job_outcome).

    `problems` each finish the job with errors ("2 trajectories were left unjudged because the judge failed");
    `failures` are the texts of failures that did not fail a unit (a judge call's error), counted with the units'
    when the job's error names its most frequent root cause.
    """

    problems: tuple[str, ...] = ()
    failures: Iterable[str] = ()


class JobKind(ABC):
    kind: ClassVar[str]
    label: ClassVar[str]
    # The stages in the order they run: progress is shown in this order.
    stages: ClassVar[tuple[str, ...]]
    # The parameters a job of this kind is queued with: one serializer holding the range rules and caps, whose
    # save(actor=...) queues the job. It makes the kind's queue page, its REST request and schema and its command
    # line. None when the kind is queued by its own app (an export, by its snapshot).
    parameters: ClassVar[type[serializers.Serializer] | None] = None
    # The queue page's form, a jobs.forms.JobParametersForm for pages that need more than the serializer says (a
    # domain to choose from a list); None: a form made from the parameters.
    form: ClassVar[type[forms.Form] | None] = None
    # The queue page is /queue/<queue_slug>/ (None: the kind's name).
    queue_slug: ClassVar[str | None] = None
    # The job page's panel of what the job made, rendered with `job` and `summary` (see summary()); None: none.
    result_template: ClassVar[str | None] = None

    def parameters_serializer(self) -> type[serializers.Serializer]:
        """The serializer of a kind queued with parameters (one of job_kinds_queueable())."""
        if self.parameters is None:
            raise TypeError(f"the {self.kind} kind is queued by its own app, not with parameters")
        return self.parameters

    @abstractmethod
    def plan(self, job, stage: str | None) -> tuple[str, list[UnitPlan]] | None:
        """Units of the stage after `stage` (None: the first stage); None when the job is complete."""

    @abstractmethod
    def run(self, job, unit) -> Callable[[], dict[str, Any]]:
        """Do the slow work of a unit (LLM calls) and return a function that writes its result.

        The writer runs inside the transaction that marks the unit done, so a unit redelivered
        after a crash or run twice at once writes its result exactly once. A writer may have a
        `discard()` method, called instead when it will not run (cancelled job, unit already done)
        or when it failed, to release what the slow work left behind (a temporary file). A writer that
        stores a failure instead of raising (a judge verdict whose call failed, a trajectory an LLM error cut
        short) puts it in its result under "error": the unit then counts as ended in an error, in the progress
        and the job's outcome.

        A long unit says how far it has got with jobs.leases.unit_progress(unit.pk, ...): its job's page and API
        show it while it runs.
        """

    def summary(self, job) -> dict[str, Any]:
        """What the job made, as JSON (counts, ids): shown on its page and in the API, kept on the job when it
        ends; the job's units and usage are added beside it."""
        return {}

    def outcome(self, job) -> Shortfalls:
        """What the job made that falls short beyond its units (see Shortfalls), once its work has ended."""
        return Shortfalls()

    @property
    def page_slug(self) -> str:
        return self.queue_slug or self.kind


_KINDS: dict[str, JobKind] = {}


def job_kind_register[K: type[JobKind]](kind_class: K) -> K:
    """Register a kind (a class decorator). Refuses a name or a stage the job tables cannot hold, a name or queue
    address that is not a slug, and a second kind of the same name or address."""
    kind = kind_class()
    name = kind.kind
    if len(name) > KIND_MAX_LENGTH or not SLUG.match(name):
        raise ImproperlyConfigured(f"job kind {name!r}: a slug of at most {KIND_MAX_LENGTH} characters (Job.kind)")
    if long := [stage for stage in kind.stages if len(stage) > STAGE_MAX_LENGTH]:
        raise ImproperlyConfigured(f"job kind {name}: stages of at most {STAGE_MAX_LENGTH} characters: {long}")
    if not SLUG.match(kind.page_slug):
        raise ImproperlyConfigured(f"job kind {name}: its queue_slug {kind.page_slug!r} is not a slug")
    for other in _KINDS.values():
        if _where(type(other)) == _where(kind_class):
            continue  # the same class, its module imported again: it takes its old place
        if other.kind == name:
            raise ImproperlyConfigured(f"job kind {name} is registered twice ({_where(type(other))})")
        if other.page_slug == kind.page_slug:
            raise ImproperlyConfigured(f"job kinds {name} and {other.kind} have the same queue page")
    _KINDS[name] = kind
    return kind_class


def _where(kind_class: type) -> str:
    return f"{kind_class.__module__}.{kind_class.__qualname__}"


def job_kinds_discover() -> None:
    """Import every installed app's `job_kinds` module, and each module of it when it is a package: their kinds
    register themselves. Run by JobsConfig.ready, once the models are loaded; importing again is harmless."""
    autodiscover_modules(DISCOVERED_MODULE)
    for app in apps.get_app_configs():
        package = sys.modules.get(f"{app.name}.{DISCOVERED_MODULE}")
        if package is not None and hasattr(package, "__path__"):
            for module in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
                import_module(module.name)


def job_kind_for(kind: str) -> JobKind:
    """The registered kind of that name (KeyError when there is none)."""
    return _KINDS[kind]


def job_kind_choices() -> list[tuple[str, str]]:
    """(kind, label) of every registered kind: the choices of Job.kind and of the job filters."""
    return [(name, kind.label) for name, kind in _KINDS.items()]


def job_kinds_queueable() -> dict[str, JobKind]:
    """The kinds a job can be queued for by name (through the API, the command or a queue page), by kind."""
    return {name: kind for name, kind in _KINDS.items() if kind.parameters is not None}


def job_kind_for_page(slug: str) -> JobKind | None:
    """The queueable kind whose queue page is /queue/<slug>/."""
    return next((kind for kind in job_kinds_queueable().values() if kind.page_slug == slug), None)
