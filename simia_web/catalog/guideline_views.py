"""The guidelines pages: a domain's, and the workspace's default that domains without their own follow. Members read
them rendered, with every version and its changes; curators write them (naming the version they edited) and bring
an earlier version back."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace, page_workspace_ids, role_require_in
from simia_web.accounts.services import (
    workspace_gold_rate_set,
    workspace_qualification_set,
    workspace_review_stage_set,
)
from simia_web.core.errors import ValidationFailed, VersionConflict
from simia_web.core.markdown import markdown_html

from .guidelines import (
    GUIDELINES_MAX_CHARS,
    domain_review_stage_set,
    guidelines_history,
    guidelines_of,
    guidelines_revert,
    guidelines_save,
)
from .models import Domain
from .selectors import domain_named

HISTORY_LIMIT = 30


# The reviewer stage switch as the page's form posts it: a domain's may follow its workspace's ("").
STAGE_CHOICES = {"on": True, "off": False, "": None}
STAGE_CHOICE_OF = {value: name for name, value in STAGE_CHOICES.items()}


def _review_stage_set(request, workspace, domain: Domain | None) -> None:
    choice = request.POST.get("review_stage", "")
    if choice not in STAGE_CHOICES or (domain is None and choice == ""):
        messages.error(request, "Choose on or off.")
        return
    if domain is None:
        workspace_review_stage_set(workspace=workspace, on=STAGE_CHOICES[choice] is True, actor=request.user)
    else:
        domain_review_stage_set(domain=domain, on=STAGE_CHOICES[choice], actor=request.user)
    messages.success(request, "Reviewer stage saved.")


def _gold_rate_set(request, workspace) -> None:
    try:
        percent = float(request.POST.get("gold_percent", ""))
        workspace_gold_rate_set(workspace=workspace, rate=percent / 100, actor=request.user)
    except (ValueError, ValidationFailed):
        messages.error(request, "The gold rate is a percentage from 0 to 100.")
        return
    messages.success(request, "Gold rate saved.")


def _qualification_set(request, workspace) -> None:
    percent = request.POST.get("qualify_percent", "").strip()
    try:
        accuracy = float(percent) / 100 if percent else None
        window = int(request.POST.get("qualify_window", "") or 20)
        workspace_qualification_set(workspace=workspace, accuracy=accuracy, window=window, actor=request.user)
    except (ValueError, ValidationFailed):
        messages.error(
            request, "The qualifying accuracy is a percentage from 0 to 100 (or empty), the window 1 to 1000."
        )
        return
    messages.success(request, "Qualification saved.")


def _int(value, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@role_required("annotator")
def workspace_guidelines(request):
    """The current workspace's default guidelines."""
    return _guidelines_page(request, domain=None)


@role_required("annotator")
def domain_guidelines(request, name: str):
    """A domain's own guidelines (or, until it has some, the workspace's default it follows)."""
    domain = domain_named(name=name, workspace_ids=page_workspace_ids(request.user))
    if domain is None:
        raise Http404("No domain matches.")
    return _guidelines_page(request, domain=domain)


def _guidelines_page(request, *, domain: Domain | None):
    workspace = page_workspace(request.user)
    if workspace is None:
        raise Http404("You belong to no workspace.")
    guidelines = guidelines_of(workspace_id=workspace.pk, domain=domain)
    error, conflict, status = None, None, 200
    text = guidelines.text if guidelines else ""
    if request.method == "POST" and request.POST.get("action") == "qualification" and domain is None:
        role_require_in(request.user, workspace.pk, "curator")
        _qualification_set(request, workspace)
        return redirect(request.path)
    if request.method == "POST" and request.POST.get("action") == "gold_rate" and domain is None:
        role_require_in(request.user, workspace.pk, "curator")
        _gold_rate_set(request, workspace)
        return redirect(request.path)
    if request.method == "POST" and request.POST.get("action") == "review_stage":
        role_require_in(request.user, workspace.pk, "curator")
        _review_stage_set(request, workspace, domain)
        return redirect(request.path)
    if request.method == "POST":
        role_require_in(request.user, workspace.pk, "curator")
        expected = _int(request.POST.get("version"))
        try:
            if request.POST.get("action") == "revert" and guidelines is not None:
                saved = guidelines_revert(
                    guidelines=guidelines,
                    to_version=_int(request.POST.get("to_version")),
                    expected_version=expected,
                    actor=request.user,
                )
            else:
                text = request.POST.get("text", "")
                saved = guidelines_save(
                    workspace_id=workspace.pk,
                    domain=domain,
                    text=text,
                    expected_version=expected,
                    actor=request.user,
                    note=request.POST.get("note", "").strip(),
                )
        except VersionConflict as exc:
            conflict, status = exc, 409
            guidelines = guidelines_of(workspace_id=workspace.pk, domain=domain)
        except ValidationFailed as exc:
            error, status = str(exc), 400
        else:
            messages.success(request, f"Saved version {saved.version} of the guidelines.")
            return redirect(request.path)
    inherited = (
        guidelines_of(workspace_id=workspace.pk, domain=None) if domain is not None and guidelines is None else None
    )
    context = {
        "domain": domain,
        "workspace": workspace,
        "guidelines": guidelines,
        "inherited": inherited,
        "html": markdown_html(guidelines.text if guidelines else (inherited.text if inherited else "")),
        "text": text,
        "version": guidelines.version if guidelines else 0,
        "can_edit": request.user.has_role("curator"),
        "error": error,
        "conflict": conflict,
        "history": guidelines_history(guidelines, limit=HISTORY_LIMIT),
        "max_chars": GUIDELINES_MAX_CHARS,
        "stage_choice": STAGE_CHOICE_OF.get(domain.review_stage, "") if domain else "",
        "stage_on": (workspace.review_stage if domain is None or domain.review_stage is None else domain.review_stage),
    }
    return render(request, "catalog/guidelines.html", context, status=status)
