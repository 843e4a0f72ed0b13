"""`{% load dates %}`: every date a page shows goes through these filters (simia_web.core.dates): one format.

{{ job.created_at|when }}              <time datetime="2026-01-05T14:03:07+00:00">2026-01-05 14:03</time>
{{ event.created_at|when:"seconds" }}  … 2026-01-05 14:03:07
{{ user.date_joined|when:"day" }}      … 2026-01-05
{{ t.reserved_until|when:"time" }}     … 14:03:07
{{ day|when_text:"day" }}              2026-01-05, as plain text (SVG text, attributes)
"""

from django import template

from simia_web.core.dates import shown, time_element

register = template.Library()


@register.filter
def when(value, precision: str = ""):
    return time_element(value, precision)


@register.filter
def when_text(value, precision: str = "") -> str:
    return shown(value, precision)
