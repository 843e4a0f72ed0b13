"""LLM pages: the request/response viewer for one call (admins, and the owner of the RL session it was made for),
and the LLM endpoints page (admins): profiles listed as they will be used, created and edited, tested with the
capability probe, and the stage routes."""

from datetime import UTC, datetime

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from simia_web.accounts.models import owner_workspace_id
from simia_web.accounts.permissions import role_required
from simia_web.core.display import pretty_json
from simia_web.core.errors import ValidationFailed
from simia_web.core.forms import form_errors_add

from .access import llm_call_visible
from .forms import EndpointProfileForm, StageRoutesForm
from .keys import profile_key_shown
from .models import EndpointProfile, Stage
from .selectors import (
    llm_calls_with_profile,
    profile_adaptive_limit,
    profile_as_used_here,
    profile_findings,
    profile_probe_passed,
    profiles_as_used,
    stage_routes,
)
from .services import profile_save, stage_routes_set
from .tasks import endpoint_check_run
from .validation import url_redacted

# A test not answered in this long is most likely waiting for a worker that is not running.
PROBE_PATIENCE_SECONDS = 120


@role_required("annotator")
def call_detail(request, pk: int):
    call = get_object_or_404(llm_calls_with_profile(), pk=pk)
    if call.job_id is not None and owner_workspace_id(call.job) != request.user.current_workspace_id:
        raise Http404("No such call in this workspace.")
    if not llm_call_visible(call=call, user=request.user):
        raise PermissionDenied("LLM calls are for admins, and for the owner of the RL session they were made for.")
    return render(
        request,
        "llm/call.html",
        {"call": call, "request_json": pretty_json(call.request), "response_json": pretty_json(call.response)},
    )


def _row(profile: EndpointProfile, routes: dict[str, int]) -> dict:
    """A profile as the list shows it: what will be used, the key masked, what its last test found."""
    found = profile_findings(profile)
    return {
        "profile": profile,
        "base_url": url_redacted(profile.base_url) or "OpenAI (api.openai.com)",
        "key": profile_key_shown(profile),
        "found": found,
        "passed": profile_probe_passed(profile),
        "stages": [label for stage, label in Stage.choices if routes.get(stage) == profile.pk],
    }


def _environment() -> dict:
    return {
        "base_url": url_redacted(settings.OPENAI_BASE_URL) or "not set (OpenAI's own endpoint)",
        "model": settings.SIMIA_MODEL,
        "key_env": settings.OPENAI_API_KEY_ENV,
    }


@role_required("admin")
def endpoint_list(request):
    profiles = profiles_as_used()
    routes = stage_routes()
    routes_form = StageRoutesForm(request.POST or None, profiles=profiles, routes=routes)
    status = 200
    if request.method == "POST":
        if routes_form.is_valid():
            try:
                changed = stage_routes_set(routes=routes_form.routes(), actor=request.user)
            except ValidationFailed as exc:
                form_errors_add(routes_form, exc)
            else:
                messages.success(request, f"Routes saved ({len(changed)} changed).")
                return redirect("llm-endpoints")
        status = 400
    context = {
        "rows": [_row(profile, routes) for profile in profiles],
        "routes_form": routes_form,
        "environment": _environment(),
        "default_named": any(p.is_default for p in profiles),
    }
    return render(request, "llm/endpoint_list.html", context, status=status)


def _since(request) -> datetime | None:
    try:
        since = datetime.fromisoformat(request.GET["since"])
    except (KeyError, ValueError):
        return None
    return since if since.tzinfo else since.replace(tzinfo=UTC)


def _probe_context(profile: EndpointProfile, since: datetime | None) -> dict:
    found = profile_findings(profile)
    checked = found.get("checked_at")
    checked_at = datetime.fromisoformat(checked) if checked else None
    waiting = since is not None and (checked_at is None or checked_at < since)
    return {
        "profile": profile,
        "found": found,
        "passed": profile_probe_passed(profile),
        "waiting": waiting,
        "since": since.isoformat() if since else "",
        "late": waiting and since is not None and (datetime.now(UTC) - since).total_seconds() > PROBE_PATIENCE_SECONDS,
        "context_window": profile.context_window,
    }


def _edit(request, profile: EndpointProfile, *, title: str):
    form = EndpointProfileForm(request.POST or None, instance=profile)
    if not profile.pk and not EndpointProfile.objects.filter(is_default=True).exists():
        form.initial["is_default"] = True
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                saved = profile_save(profile=form.save(commit=False), api_key=form.key_change(), actor=request.user)
            except ValidationFailed as exc:
                form_errors_add(form, exc)
            else:
                if request.POST.get("then") == "test":
                    return _test_and_show(saved)
                messages.success(request, f"Endpoint profile {saved.name} saved.")
                return redirect("llm-endpoints")
        status = 400
    shown = profile_as_used_here(profile) if profile.pk else None
    context = {
        "form": form,
        "title": title,
        "profile": profile,
        "environment": _environment(),
        "key": profile_key_shown(shown) if shown else "",
        **({"probe": _probe_context(shown, _since(request))} if shown else {}),
        **({"adaptive": profile_adaptive_limit(shown)} if shown else {}),
    }
    return render(request, "llm/endpoint_form.html", context, status=status)


@role_required("admin")
def endpoint_create(request):
    return _edit(request, EndpointProfile(), title="New LLM endpoint")


@role_required("admin")
def endpoint_edit(request, pk: int):
    profile = get_object_or_404(EndpointProfile, pk=pk)
    return _edit(request, profile, title=f"LLM endpoint {profile.name}")


def _test_and_show(profile: EndpointProfile):
    """Queue the capability probe for a worker and show the profile's page, which waits for its table."""
    since = datetime.now(UTC).replace(microsecond=0)
    endpoint_check_run.delay(profile.pk)
    query = urlencode({"since": since.isoformat()})
    return redirect(f"{reverse('llm-endpoint', args=[profile.pk])}?{query}#probe")


@role_required("admin")
@require_POST
def endpoint_test(request, pk: int):
    return _test_and_show(get_object_or_404(EndpointProfile, pk=pk))


@role_required("admin")
def endpoint_probe(request, pk: int):
    """The probe's panel, polled by htmx while a test is under way; 286 stops the polling."""
    profile = profile_as_used_here(get_object_or_404(EndpointProfile, pk=pk))
    context = _probe_context(profile, _since(request))
    response = render(request, "llm/_probe.html", context)
    if not context["waiting"] or context["late"]:
        response.status_code = 286
    return response
