"""The queue pages of the registered kinds, for any page to link to (the dashboard, the job list)."""

from django import template

from simia_web.jobs.kinds import job_kinds_queueable

register = template.Library()


@register.inclusion_tag("jobs/_queue_links.html")
def queue_links() -> dict:
    return {"kinds": [(kind.page_slug, kind.label) for kind in job_kinds_queueable().values()]}
