"""The synthesize, rollout and amplify job kinds: their stages, units, what each unit writes, and their
registration (parameters and forms are in synthesis.params)."""

from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.catalog.references import reference_for
from simia_web.catalog.selectors import domain_unusable_reason, domain_with_valid_apis
from simia_web.catalog.services import apis_store, tasks_store
from simia_web.curation.models import TrajectoryKind
from simia_web.curation.services import trajectory_create
from simia_web.jobs.pipelines import UnitPlan, pipeline_register
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from simia_web.llm.services import llm_call_ids

from .amplify import amplify_unit_run, seed_order
from .generation import API_PROMPT_VERSION, TASK_PROMPT_VERSION, apis_generate, domain_design, tasks_generate
from .params import (
    AmplifyForm,
    AmplifyJobSerializer,
    RolloutForm,
    RolloutJobSerializer,
    SynthesisForm,
    SynthesizeJobSerializer,
)
from .rollout import RolloutLimits, api_specs, rollout_run
from .services import AMPLIFY, REFERENCE, ROLLOUT, SYNTHESIZE


class UnusableDomain(Exception):
    """A domain that a unit cannot use as it is: the unit fails with this reason and calls no LLM."""


def _require_usable(domain: Domain) -> None:
    if reason := domain_unusable_reason(domain):
        raise UnusableDomain(reason)


def _limits(params: dict) -> RolloutLimits:
    return RolloutLimits(
        max_steps=params.get("max_steps", 12),
        max_errors=params.get("max_errors", 3),
        user_turns=params.get("user_turns", 0),
    )


def _provenance(unit, client, reply, prompt_version: str) -> dict:
    return {
        "stage": unit.stage,
        "llm_calls": reply.call_ids,
        "model": client.profile.model,
        "profile": client.profile.name,
        "prompt_version": prompt_version,
    }


def _rollout_units(task_ids: list[int], rollouts: int) -> list[UnitPlan]:
    return [
        UnitPlan("rollout", f"rollout:{task_id}:{k}", {"task": task_id, "sample": k})
        for task_id in task_ids
        for k in range(rollouts)
    ]


def _rollout_writer(job, unit):
    # Only what a rollout reads: a task's other columns (provenance, API lists) are a third of the read's CPU.
    fields = ("domain_id", "instruction", "expected_outcome", "user_scenario")
    task = Task.objects.only(*fields).get(pk=unit.params["task"])
    domain, apis = domain_with_valid_apis(task.domain_id, job_id=job.pk)
    _require_usable(domain)
    reference = None
    if job.params.get("environment") == REFERENCE:
        reference = reference_for(domain)
        if reference is None:
            raise UnusableDomain(f"domain {domain.name} has no reference environment to roll out against")
    outcome = rollout_run(
        task=task,
        domain=domain,
        apis=apis,
        limits=_limits(job.params),
        job_id=job.pk,
        profiles=job.params.get("profiles", {}),
        sample=f"{job.pk}:{unit.key}",
        reference=reference,
    )

    def write():
        fields = outcome["fields"]
        fields["provenance"]["llm_calls"] = llm_call_ids(outcome["llm_calls"])
        trajectory = trajectory_create(
            kind=TrajectoryKind.ROLLOUT,
            job=job,
            unit=unit,
            violations=outcome["violations"],
            verdict=outcome["verdict"],
            **fields,
        )
        return {"trajectory": trajectory.pk, "status": trajectory.status}

    return write


class SynthesizePipeline:
    kind = SYNTHESIZE
    label = "Synthesis (domains → APIs → tasks → rollouts)"
    stages = ("api_synthesis", "task_synthesis", "rollout")
    parameters = SynthesizeJobSerializer
    form = SynthesisForm

    def plan(self, job, stage):
        params = job.params
        if stage is None:
            return "api_synthesis", [
                UnitPlan("api_synthesis", f"apis:{name}", {"domain": name}) for name in params["domains"]
            ]
        if stage == "api_synthesis":
            return "task_synthesis", [
                UnitPlan("task_synthesis", f"tasks:{name}", {"domain": name}) for name in params["domains"]
            ]
        if stage == "task_synthesis":
            task_ids = list(Task.objects.filter(job=job, status=TaskStatus.VALID).values_list("id", flat=True))
            return "rollout", _rollout_units(task_ids, params["rollouts"])
        return None

    def run(self, job, unit):
        if unit.stage == "rollout":
            return _rollout_writer(job, unit)
        domain = Domain.objects.get(name=unit.params["domain"])
        profiles = job.params.get("profiles", {})
        if unit.stage == "api_synthesis":
            client = client_for_stage(Stage.API_SYNTHESIS, job_id=job.pk, profile_id=profiles.get(Stage.API_SYNTHESIS))
            reply = apis_generate(
                client=client,
                domain_name=domain.name,
                description=domain.description,
                policy=domain.policy,
                count=job.params["apis"],
            )

            design = domain_design(reply.data)

            def write():
                stored = apis_store(
                    domain=domain,
                    apis=design["apis"],
                    state_schema=design["state_schema"],
                    initial_state=design["initial_state"],
                    job=job,
                    provenance=_provenance(unit, client, reply, API_PROMPT_VERSION),
                )
                return {"apis": len(stored), "valid": sum(a.valid for a in stored)}

            return write
        client = client_for_stage(Stage.TASK_SYNTHESIS, job_id=job.pk, profile_id=profiles.get(Stage.TASK_SYNTHESIS))
        _require_usable(domain)
        apis = list(domain.apis.filter(valid=True))
        if not apis:
            raise UnusableDomain(f"domain {domain.name} has no valid APIs to write tasks for")
        reply = tasks_generate(
            client=client,
            domain_name=domain.name,
            policy=domain.policy,
            apis=[{"name": n, **s} for n, s in api_specs(apis).items()],
            state=domain.initial_state,
            count=job.params["tasks"],
        )

        def write():
            provenance = _provenance(unit, client, reply, TASK_PROMPT_VERSION)
            stored = tasks_store(domain=domain, tasks=reply.data["tasks"], job=job, provenance=provenance)
            return {"tasks": len(stored), "valid": sum(t.status == TaskStatus.VALID for t in stored)}

        return write


class RolloutPipeline:
    kind = ROLLOUT
    label = "Rollouts on existing tasks"
    stages = ("rollout",)
    parameters = RolloutJobSerializer
    form = RolloutForm

    def plan(self, job, stage):
        if stage is not None:
            return None
        tasks = Task.objects.filter(domain__name=job.params["domain"], status=TaskStatus.VALID).order_by("id")
        if job.params.get("tasks"):
            tasks = tasks[: job.params["tasks"]]
        return "rollout", _rollout_units(list(tasks.values_list("id", flat=True)), job.params["rollouts"])

    def run(self, job, unit):
        return _rollout_writer(job, unit)


class AmplifyPipeline:
    kind = AMPLIFY
    label = "Seed amplification"
    stages = ("amplify",)
    parameters = AmplifyJobSerializer
    form = AmplifyForm

    def plan(self, job, stage):
        if stage is not None:
            return None
        return "amplify", [
            UnitPlan("amplify", f"amplify:{i}", {"seed": seed_id, "index": i})
            for i, seed_id in enumerate(seed_order(job.params))
        ]

    def run(self, job, unit):
        return amplify_unit_run(job, unit)


pipeline_register(SynthesizePipeline())
pipeline_register(RolloutPipeline())
pipeline_register(AmplifyPipeline())
