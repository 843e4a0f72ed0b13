"""The request/response viewer for one LLM call."""

from django.shortcuts import get_object_or_404, render

from simia_web.accounts.permissions import role_required
from simia_web.curation.selectors import pretty_json

from .models import LLMCall


@role_required("annotator")
def call_detail(request, pk: int):
    call = get_object_or_404(LLMCall.objects.select_related("profile", "job"), pk=pk)
    return render(
        request,
        "llm/call.html",
        {"call": call, "request_json": pretty_json(call.request), "response_json": pretty_json(call.response)},
    )
