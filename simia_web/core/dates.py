"""How pages show a moment: one format everywhere, `2026-01-05 14:03` in the site's time zone (`TIME_ZONE`), with
seconds where they matter (`2026-01-05 14:03:07`), a day alone (`2026-01-05`), or a time alone (`14:03:07`) for a
moment minutes away such as the end of a hold. Pages print it in a `<time>` element whose `datetime` attribute carries
the ISO value (the `when` filter of the `dates` template library); scripts get the same text from the JSON they read.
"""

from datetime import date, datetime

from django.utils import dateformat, timezone
from django.utils.html import format_html

# Precision → the `date` filter's format. "" is the default: minutes.
FORMATS = {"": "Y-m-d H:i", "seconds": "Y-m-d H:i:s", "day": "Y-m-d", "time": "H:i:s"}


def moment(value) -> date | None:
    """A datetime or date from a model field or an ISO string (as JSON keeps it); None for anything else."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value) if value else None
        except ValueError:
            return None
    if isinstance(value, datetime):
        return timezone.localtime(value) if timezone.is_aware(value) else value
    return value if isinstance(value, date) else None


def shown(value, precision: str = "") -> str:
    """The text a page shows for `value` ("" for none), at `precision` ("", "seconds", "day" or "time")."""
    at = moment(value)
    if at is None:
        return ""
    if not isinstance(at, datetime) and precision != "day":
        precision = "day"  # a date alone has no time to show
    return dateformat.format(at, FORMATS[precision])


def time_element(value, precision: str = "") -> str:
    """`<time datetime="ISO">shown</time>`, or "" for none (so that `|default:"—"` applies)."""
    at = moment(value)
    if at is None:
        return ""
    return format_html('<time datetime="{}">{}</time>', at.isoformat(), shown(at, precision))
