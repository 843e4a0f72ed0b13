"""Writing LLMCall rows, and what is learned about endpoints (modes, context window, characters per token).

LLMCall rows are written at once, or held while a job unit runs and written together when it ends.

A rollout makes several calls one after another; one INSERT at the end of the unit instead of one per
call saves database round trips, and on a busy worker every round trip gives up the GIL and waits
to get it back, which delays the other threads' requests too.
"""

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction

from simia_web.core.errors import ValidationFailed
from simia_web.core.rows import rows_insert
from simia_web.core.services import audit_record

from .keys import api_key_encrypt
from .models import EndpointProfile, LLMCall, Stage, StageRoute
from .selectors import profile_endpoint, profile_findings
from .signals import llm_call_invalidated, llm_calls_recorded
from .slots import Rank, first_come

_held: ContextVar[list[LLMCall] | None] = ContextVar("held_llm_calls", default=None)
_held_job: ContextVar[int | None] = ContextVar("held_llm_calls_job", default=None)
# Jobs of which this process has seen the last unit start, oldest first (a bounded ordered set).
_finishing_jobs: dict[int, None] = {}
_FINISHING_JOBS_KEPT = 1000
_FINISHING = -1_000_000  # a finishing job's units go before every other job's


def llm_call_record(call: LLMCall) -> LLMCall:
    """Save the call's row now, or hold it when inside `llm_calls_held` (its pk is set once written)."""
    held = _held.get()
    if held is None:
        call.save(force_insert=True)
        llm_calls_recorded.send(sender=LLMCall, calls=[call])
    else:
        held.append(call)
    return call


def llm_call_mark_invalid(call: LLMCall, *, kind: str, problem: str) -> None:
    """An answer that arrived but could not be used (bad JSON, wrong schema)."""
    call.error, call.error_kind = problem[:4000], kind
    if call.pk is not None:
        LLMCall.objects.filter(pk=call.pk).update(error=call.error, error_kind=kind)
        llm_call_invalidated.send(sender=LLMCall, call=call, kind=kind)


@contextmanager
def llm_calls_held(*, job_id: int | None = None) -> Iterator[list[LLMCall]]:
    """Hold the rows of the calls made inside (by a unit of `job_id`); write them with `llm_calls_write`."""
    held: list[LLMCall] = []
    token, job_token = _held.set(held), _held_job.set(job_id)
    try:
        yield held
    finally:
        _held.reset(token)
        _held_job.reset(job_token)


def llm_job_finishing(job_id: int) -> None:
    """The job has no unit left to start: from now on its units here get the endpoint fewest-calls-first."""
    _finishing_jobs[job_id] = None
    while len(_finishing_jobs) > _FINISHING_JOBS_KEPT:
        del _finishing_jobs[next(iter(_finishing_jobs))]


def llm_slot_rank() -> Rank:
    """How soon the running code gets a concurrency slot when it has to wait for one (lower is sooner).

    First come, first served, except for the units of a finishing job: they go first, the unit with
    the fewest calls so far (most likely the most still to make) before the others, so that the
    job's last units end together instead of one after another. The rank is read whenever a slot is
    handed out, so units already waiting when their job starts finishing are reordered too.
    """
    job_id = _held_job.get()
    if job_id is None:
        return first_come
    return functools.partial(_unit_rank, job_id, _held.get() or [])


def _unit_rank(job_id: int, calls: list[LLMCall]) -> int:
    return _FINISHING + len(calls) if job_id in _finishing_jobs else 0


def llm_call_ids(calls: list[LLMCall]) -> list[int]:
    """The calls' row ids, for provenance: known once the rows are written."""
    ids = [call.pk for call in calls]
    if None in ids:
        raise RuntimeError("LLM call rows are held and not written yet: take their ids in the unit's writer")
    return ids


def llm_calls_write(calls: list[LLMCall]) -> None:
    """Write held rows in one INSERT (their pks are set then), then tell who counts them.

    Called again after an outage interrupted it, it writes only the rows not written yet: no row twice."""
    unwritten = [call for call in calls if call.pk is None]
    if unwritten:
        try:
            rows_insert(unwritten)  # fixed SQL (core.rows): every unit of every job writes its calls
        except Exception:  # rolled back: a batch written before the failure is not written after all
            for call in unwritten:
                call.pk = None
            raise
    if calls:
        llm_calls_recorded.send(sender=LLMCall, calls=calls)


# -- what an endpoint takes: found by check_endpoint or learned in use ------------------------------

_LEARNED_KEPT = 20  # the latest fallbacks learned in use, kept as evidence


def profile_capabilities_record(*, profile: EndpointProfile, found: dict, context_window: int | None) -> None:
    """Store what a check of the endpoint found (modes, window and evidence); a window it found replaces the old."""
    with transaction.atomic():
        locked = EndpointProfile.objects.select_for_update().get(pk=profile.pk)
        learned = profile_findings(_as_used(locked, profile)).get("learned", [])
        locked.capabilities = {**found, "endpoint": profile_endpoint(profile), "learned": learned}
        if context_window:
            locked.context_window = context_window
        locked.save(update_fields=["capabilities", "context_window"])
    profile.capabilities, profile.context_window = locked.capabilities, locked.context_window


def profile_capability_learn(*, profile: EndpointProfile, what: str, mode: str, evidence: str) -> None:
    """A fallback taken in use ("structured"/"tools" -> the weaker mode), remembered with what caused it."""
    with transaction.atomic():
        locked = EndpointProfile.objects.select_for_update().get(pk=profile.pk)
        capabilities = dict(profile_findings(_as_used(locked, profile))) or {"endpoint": profile_endpoint(profile)}
        if capabilities.get(what) == mode:
            return
        learned = [*capabilities.get("learned", []), {"what": what, "mode": mode, "evidence": evidence[:300]}]
        capabilities.update({what: mode, "learned": learned[-_LEARNED_KEPT:]})
        locked.capabilities = capabilities
        locked.save(update_fields=["capabilities"])
    profile.capabilities = capabilities


def profile_context_window_learn(*, profile: EndpointProfile, context_window: int | None, source: str) -> None:
    """The context window a server reported or named in a refusal (None: it reports none, so the default holds).

    One UPDATE from the profile as this process read it: it runs once per profile and process, on a job's
    first call, where a locked read-modify-write would cost every worker three more round trips.
    """
    found = profile_findings(profile) or {"endpoint": profile_endpoint(profile)}
    capabilities = {**found, "context_window_source": source}
    changes = {"capabilities": capabilities, **({"context_window": context_window} if context_window else {})}
    EndpointProfile.objects.filter(pk=profile.pk).update(**changes)
    for name, value in changes.items():
        setattr(profile, name, value)


def _as_used(row: EndpointProfile, profile: EndpointProfile) -> EndpointProfile:
    """The row with the endpoint the caller uses (a profile that follows the environment is not its row's)."""
    row.base_url, row.model = profile.base_url, profile.model
    return row


def profile_learned_store(*, profile: EndpointProfile, field: str, value: float) -> None:
    """Keep a figure learned in use (chars_per_token, tokens_per_second) for every process using the profile."""
    EndpointProfile.objects.filter(pk=profile.pk).update(**{field: value})
    setattr(profile, field, value)


# -- profiles and stage routes, as admins set them on the LLM endpoints page -----------------------------


@transaction.atomic
def profile_save(*, profile: EndpointProfile, api_key: str | None, actor) -> EndpointProfile:
    """Create or update a profile as a form built it; `api_key` is stored encrypted ("" removes the stored key,
    None leaves it). A default profile takes the place of the one before it."""
    created = profile.pk is None
    if api_key is not None:
        profile.api_key_encrypted = api_key_encrypt(api_key)
    if profile.is_default:
        EndpointProfile.objects.filter(is_default=True).exclude(pk=profile.pk).update(is_default=False)
    profile.save()
    key = "kept" if api_key is None else "stored" if api_key else "from the environment"
    audit_record(
        actor=actor,
        action="llm.profile.create" if created else "llm.profile.update",
        target=profile,
        data={"name": profile.name, "model": profile.model, "key": key},
    )
    return profile


@transaction.atomic
def stage_routes_set(*, routes: dict[str, int | None], actor) -> list[str]:
    """Route each stage to a profile (None: to the default profile); returns the stages whose route changed."""
    current = {route.stage: route for route in StageRoute.objects.select_for_update()}
    changed = []
    for stage, profile_id in routes.items():
        if stage not in Stage.values:
            raise ValidationFailed(f"no stage named {stage}", field=stage)
        route = current.get(stage)
        before = route.profile_id if route else None
        if before == profile_id:
            continue
        if profile_id is None and route is not None:
            data = {"stage": stage, "from": before, "to": None}
            audit_record(actor=actor, action="llm.route", target=route, data=data)
            route.delete()
        elif profile_id is not None:
            if not EndpointProfile.objects.filter(pk=profile_id).exists():
                raise ValidationFailed(f"no endpoint profile with id {profile_id}", field=stage)
            route, _ = StageRoute.objects.update_or_create(stage=stage, defaults={"profile_id": profile_id})
            audit_record(
                actor=actor, action="llm.route", target=route, data={"stage": stage, "from": before, "to": profile_id}
            )
        changed.append(stage)
    return changed
