"""Near-duplicate clusters in the review workspace: the list of clusters, one cluster, and "keep one, reject the
rest" (a bulk decision through the curation services, so holds, individual decisions and undo apply)."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.curation.duplicates import KEEP_LABELS, cluster_detail, cluster_of_workspace, clusters_page
from simia_web.curation.services import ReviewError, cluster_keep_one

from .bulk import bulk_summary
from .common import int_or_none, local_next

PAGE_SIZE = 25
MEMBERS_LISTED = 10  # per cluster in the list; a cluster's own page lists up to CLUSTER_MEMBERS_MAX
CLUSTER_MEMBERS_MAX = 200


@role_required("annotator")
def clusters_list(request):
    after = int_or_none(request.GET.get("after"))
    clusters = clusters_page(
        workspace_ids=page_workspace_ids(request.user), after=after, limit=PAGE_SIZE + 1, members_shown=MEMBERS_LISTED
    )
    context = {
        "clusters": clusters[:PAGE_SIZE],
        "next_after": clusters[PAGE_SIZE - 1].head if len(clusters) > PAGE_SIZE else None,
        "first_page": after is None,
        "members_listed": MEMBERS_LISTED,
        "keep_rule": KEEP_LABELS["accepted_first"],
        "last_bulk": request.session.pop("undo_bulk", None),
        "here": request.get_full_path(),
    }
    return render(request, "curation/clusters.html", context)


@role_required("annotator")
def cluster_page(request, head: int):
    cluster = cluster_detail(workspace_ids=page_workspace_ids(request.user), head=head, limit=CLUSTER_MEMBERS_MAX)
    if cluster is None:
        raise Http404("No such cluster: its members may have changed since.")
    context = {
        "cluster": cluster,
        "members_max": CLUSTER_MEMBERS_MAX,
        "keep_rule": KEEP_LABELS["accepted_first"],
        "last_bulk": request.session.pop("undo_bulk", None),
        "here": request.get_full_path(),
    }
    return render(request, "curation/cluster.html", context)


@role_required("curator")
@require_POST
def cluster_keep(request, head: int):
    if not cluster_of_workspace(workspace_ids=page_workspace_ids(request.user), head=head):
        raise Http404("No such cluster in this workspace.")
    back = local_next(request, reverse("near-duplicate-clusters"))
    keep = int_or_none(request.POST.get("keep"))
    shown = [pk for pk in map(int_or_none, request.POST.getlist("shown")) if pk is not None]
    if keep is None:
        messages.error(request, "Nothing changed: choose the trajectory to keep.")
        return redirect(back)
    try:
        outcome = cluster_keep_one(
            head=head, keep=keep, shown=shown, reviewer=request.user, reason=request.POST.get("reason", "")
        )
    except ReviewError as exc:
        messages.error(request, f"Nothing changed: {exc}")
        return redirect(back)
    summary = f"Kept trajectory {keep}. {bulk_summary(outcome, 'reject')}"
    if outcome.batch:  # its toast's Undo takes it back (past BULK_UNDO_MAX items, in a job)
        request.session["undo_bulk"] = {"batch": str(outcome.batch), "summary": summary}
    else:
        messages.success(request, summary)
    return redirect(back)
