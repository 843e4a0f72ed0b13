"""Pages for real APIs: importing a domain's APIs (from an OpenAPI document or an MCP server), and naming the
domain's reference environment on its page."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.core.errors import ValidationFailed, fields_said

from .importers import ImportRejected, apis_import
from .mcp import McpServer
from .references import ReferenceConfig, reference_clear, reference_set
from .selectors import domain_named

SOURCES = ("openapi", "mcp_url", "mcp_command")


@role_required("curator")
def api_import(request):
    """The API import form (also on the upload page): the same service and checks as `import_apis`."""
    domain = request.POST.get("api_domain", "") if request.method == "POST" else request.GET.get("domain", "")
    context = {"api_source": request.POST.get("source", ""), "api_domain": domain}
    if request.method != "POST":
        return render(request, "catalog/api_import.html", context)
    source, target = context["api_source"], context["api_domain"].strip()
    location = request.POST.get("location", "").strip()
    upload = request.FILES.get("document")
    if source not in SOURCES or (source == "openapi" and upload is None) or (source != "openapi" and not location):
        context["api_form_error"] = "Choose a source: an OpenAPI document to upload, or an MCP server's URL or command."
        return render(request, "catalog/api_import.html", context, status=400)
    server = None
    if source != "openapi":
        server = McpServer(command=location) if source == "mcp_command" else McpServer(url=location)
    try:
        result = apis_import(
            domain=target,
            openapi=upload,
            mcp=server,
            workspace_id=request.user.current_workspace_id,
            actor=request.user,
        )
    except ImportRejected as exc:
        context["api_rejected"] = exc
        return render(request, "catalog/api_import.html", context, status=400)
    context["api_result"] = str(result)
    context["api_result_domain"] = target
    return render(request, "catalog/api_import.html", context)


@role_required("curator")
@require_POST
def domain_reference(request, name: str):
    """Name, change or clear the domain's reference (a command needs a site administrator)."""
    domain = domain_named(name=name, workspace_ids=page_workspace_ids(request.user))
    if domain is None:
        raise Http404("No domain matches.")
    if request.POST.get("action") == "clear":
        if reference_clear(domain=domain, actor=request.user):
            messages.success(request, "The reference environment was removed.")
        return redirect("domain-detail", name=name)
    kind = request.POST.get("kind", "url")
    location = request.POST.get("location", "").strip()
    config = ReferenceConfig(
        command=location if kind == "command" else "",
        url=location if kind != "command" else "",
        reset_tool=request.POST.get("reset_tool", "").strip(),
        response_pointer=request.POST.get("response_pointer", "").strip(),
    )
    try:
        reference_set(domain=domain, config=config, actor=request.user)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    except ValidationFailed as exc:
        messages.error(request, fields_said(exc.errors))
    else:
        messages.success(request, f"Reference environment set: {config.describe()}.")
    return redirect("domain-detail", name=name)
