"""/audit-log/: who did what, to which object, where, with the values before and after (admins)."""

from django.shortcuts import render

from simia_web.accounts.permissions import role_required

from . import selectors
from .forms import AuditFilterForm


@role_required("admin")
def audit_log(request):
    form = AuditFilterForm(request.GET or None)
    rows, next_before, filters = [], None, None
    if not form.is_bound or form.is_valid():
        filters = form.filters() if form.is_bound else selectors.AuditFilters()
        before = form.cleaned_data.get("before") if form.is_bound else None
        events, next_before = selectors.audit_page(user=request.user, filters=filters, before=before)
        rows = [(event, selectors.audit_changes(event.data)) for event in events]
    query = request.GET.copy()
    query.pop("before", None)
    context = {"form": form, "rows": rows, "next_before": next_before, "query": query.urlencode()}
    return render(request, "auditlog/audit_log.html", context, status=400 if form.errors else 200)
