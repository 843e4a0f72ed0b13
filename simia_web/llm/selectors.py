import os
from datetime import UTC, datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from simia_web.core.cache import ProcessCache

from .adaptive import allowed
from .limits import profile_adaptive_state
from .models import EndpointProfile, LLMCall, StageRoute
from .validation import url_redacted

_resolved = ProcessCache("SIMIA_PROFILE_CACHE_SECONDS")


def profile_default() -> EndpointProfile:
    """The default profile, created from OPENAI_BASE_URL / SIMIA_MODEL the first time it is needed.

    While it follows the environment (as the one made here does), each process uses the base URL, key
    variable and model of its own environment, so a changed OPENAI_BASE_URL or SIMIA_MODEL takes effect
    on the next start; the row keeps the values it was made with.
    """
    profile = EndpointProfile.objects.filter(is_default=True).first()
    if profile:
        return profile_as_used_here(profile)
    name = "default"
    if EndpointProfile.objects.filter(name=name).exists():  # a non-default profile already took the name
        name = "default (from environment)"
    try:
        with transaction.atomic():  # a savepoint, so a lost race does not break the caller's transaction
            return EndpointProfile.objects.create(
                name=name,
                base_url=settings.OPENAI_BASE_URL,
                api_key_env=settings.OPENAI_API_KEY_ENV,
                model=settings.SIMIA_MODEL,
                is_default=True,
                follows_environment=True,
            )
    except IntegrityError:  # another worker created it first
        return profile_as_used_here(EndpointProfile.objects.get(is_default=True))


def profile_as_used_here(profile: EndpointProfile) -> EndpointProfile:
    """The profile as this process uses it: one that follows the environment takes this machine's base URL,
    key variable and model, however it was looked up (default, route, or id in a job's parameters)."""
    if profile.follows_environment:
        profile.base_url = settings.OPENAI_BASE_URL
        profile.api_key_env = settings.OPENAI_API_KEY_ENV
        profile.model = settings.SIMIA_MODEL
    return profile


def profile_for_stage(stage: str, profile_id: int | None = None) -> EndpointProfile:
    """The profile a job asked for, else the stage's route, else the default.

    Resolved profiles are kept for SIMIA_PROFILE_CACHE_SECONDS: a rollout asks four times, and workers
    run thousands. Saving a profile or a route clears this process's cache; other processes see the
    change when their entries expire.
    """

    def resolve() -> EndpointProfile:
        if profile_id:
            return profile_as_used_here(EndpointProfile.objects.get(pk=profile_id))
        route = StageRoute.objects.select_related("profile").filter(stage=stage).first()
        return profile_as_used_here(route.profile) if route else profile_default()

    return _resolved.get((stage, profile_id), resolve)


profile_cache_clear = _resolved.clear


def profile_endpoint(profile: EndpointProfile) -> str:
    """The server and model a profile's findings are about: one that follows the environment can move (shown
    in the API, so without the credentials a base URL may hold)."""
    return f"{url_redacted(profile.base_url)} {profile.model}"


def profile_findings(profile: EndpointProfile) -> dict:
    """What was found or learned about the profile's endpoint; nothing when it was about another one."""
    found = profile.capabilities or {}
    return found if found.get("endpoint") == profile_endpoint(profile) else {}


def llm_calls_with_profile() -> QuerySet[LLMCall]:
    """LLM calls with their profile and job, as the call viewer shows them."""
    return LLMCall.objects.select_related("profile", "job")


# -- the LLM endpoints page and the first steps ----------------------------------------------------------


def profile_probe_passed(profile: EndpointProfile) -> bool:
    """Whether the last 'Test' of the profile's endpoint, as it is used now, got an answer to a completion."""
    found = profile_findings(profile)
    return bool(found.get("checked_at")) and any(
        probe.get("status") == 200 and not str(probe.get("name", "")).startswith("/")
        for probe in found.get("evidence") or []
    )


def profiles_as_used() -> list[EndpointProfile]:
    """Every profile (a handful), the default first, each with the base URL, model and key variable this machine
    uses for it: a profile that follows the environment shows the environment's, not the values it was made with."""
    return [profile_as_used_here(profile) for profile in EndpointProfile.objects.order_by("-is_default", "name")]


def endpoint_connected() -> bool:
    """Whether some profile's endpoint, as used now, passed its last test (the first step on the dashboard)."""
    return any(profile_probe_passed(profile) for profile in profiles_as_used())


def stage_routes() -> dict[str, int]:
    """{stage: profile id} for the stages routed to a profile of their own."""
    return dict(StageRoute.objects.values_list("stage", "profile_id"))


def endpoint_status() -> str:
    """One line for `make run`'s output: whether an endpoint is configured and tested, and where to set one."""
    where = "on the LLM endpoints page (/llm/endpoints/, as an admin)"
    profiles = profiles_as_used()
    passed = [profile for profile in profiles if profile_probe_passed(profile)]
    if passed:
        profile = passed[0]
        url = url_redacted(profile.base_url) or "OpenAI"
        return f"LLM endpoint: {profile.name} ({profile.model} at {url}) passed its test."
    if profiles:
        profile = profiles[0]
        return (
            f"LLM endpoint: {profile.name} ({profile.model} at {url_redacted(profile.base_url) or 'OpenAI'}) "
            f"has not passed a test: press Test {where}."
        )
    if settings.OPENAI_BASE_URL or os.environ.get(settings.OPENAI_API_KEY_ENV):
        url = url_redacted(settings.OPENAI_BASE_URL) or "OpenAI"
        return f"LLM endpoint: {settings.SIMIA_MODEL} at {url}, from the environment, untested: press Test {where}."
    return (
        f"LLM endpoint: none configured. Set one {where}, or set OPENAI_BASE_URL, SIMIA_MODEL and OPENAI_API_KEY "
        "before `make run`."
    )


# -- adaptive concurrency ----------------------------------------------------------------------------------------

_SPARK_WIDTH, _SPARK_HEIGHT = 120, 24


def profile_adaptive_limit(profile: EndpointProfile) -> dict:
    """A profile's adaptive concurrency limit, for its page and /metrics (see llm/adaptive.py):

    {"limit": float, "allowed": whole requests allowed in flight now, "ceiling": the profile's max_concurrency,
     "known": False when the limits' Redis did not answer, "in_flight": leases held now,
     "seconds_per_kb": the least time per 1,000 bytes of work seen (0: none yet),
     "history": [{"at": datetime, "limit": float, "allowed": int}, ...] oldest first (the last 100 changes),
     "recent": the last 10 changes, newest first, "sparkline": SVG polyline points over the history}.
    """
    state = profile_adaptive_state(profile)
    ceiling = max(1, profile.max_concurrency)
    if state is None:
        return {"limit": None, "allowed": None, "ceiling": ceiling, "known": False, "in_flight": None,
                "seconds_per_kb": 0.0, "history": [], "recent": [], "sparkline": ""}  # fmt: skip
    history = [
        {"at": datetime.fromtimestamp(point["at"], tz=UTC), "limit": point["limit"], "allowed": allowed(point["limit"])}
        for point in state["history"]
    ]
    return {
        "limit": state["limit"],
        "allowed": allowed(state["limit"]),
        "ceiling": state["ceiling"],
        "known": True,
        "in_flight": state.get("in_flight", 0),
        "seconds_per_kb": state.get("noload", 0.0),
        "history": history,
        "recent": history[::-1][:10],
        "sparkline": _sparkline([point["limit"] for point in state["history"]] + [state["limit"]], state["ceiling"]),
    }


def adaptive_limits() -> dict[str, dict]:
    """{profile name: profile_adaptive_limit(profile)} for every profile (a handful)."""
    return {profile.name: profile_adaptive_limit(profile) for profile in profiles_as_used()}


def _sparkline(values: list[float], ceiling: int) -> str:
    """Points of an SVG polyline (width 120, height 24, the ceiling at the top) through the limits, in order."""
    if len(values) < 2:
        values = values * 2
    step = _SPARK_WIDTH / (len(values) - 1)
    top = max(ceiling, *values)
    return " ".join(f"{i * step:.1f},{_SPARK_HEIGHT - _SPARK_HEIGHT * v / top:.1f}" for i, v in enumerate(values))
