"""The request/response viewer for one LLM call: admins, and the owner of the RL session it was made for."""

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, render

from simia_web.accounts.permissions import role_required
from simia_web.core.display import pretty_json

from .access import llm_call_visible
from .selectors import llm_calls_with_profile


@role_required("annotator")
def call_detail(request, pk: int):
    call = get_object_or_404(llm_calls_with_profile(), pk=pk)
    if not llm_call_visible(call=call, user=request.user):
        raise PermissionDenied("LLM calls are for admins, and for the owner of the RL session they were made for.")
    return render(
        request,
        "llm/call.html",
        {"call": call, "request_json": pretty_json(call.request), "response_json": pretty_json(call.response)},
    )
