"""Dates read one way on every page: `2026-01-05 14:03` (seconds, a day or a time alone where that is what matters),
each in a `<time>` element whose `datetime` attribute is the ISO value (simia_web.core.dates, `{% load dates %}`)."""

import re
from datetime import UTC, date, datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from simia_web.core.dates import shown, time_element
from simia_web.curation.services import review_decide
from simia_web.jobs.models import JobStatus
from tests.support.factories import make_job, make_trajectory, verdict

TEMPLATES = Path(settings.BASE_DIR) / "templates"
TIME = re.compile(r'<time datetime="([^"]+)">([^<]*)</time>')
SHOWN = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2})?)?|\d{2}:\d{2}:\d{2}")
# What Django's default formats and the old ones printed: "Jan. 5, 2026, 2:03 p.m.", "Jan 5, 14:03".
OTHER_FORMATS = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d{1,2}\b|\b[ap]\.m\.")


def test_one_format_at_each_precision():
    at = datetime(2026, 1, 5, 14, 3, 7, tzinfo=UTC)
    assert shown(at) == "2026-01-05 14:03"
    assert shown(at, "seconds") == "2026-01-05 14:03:07"
    assert shown(at, "day") == "2026-01-05"
    assert shown(at, "time") == "14:03:07"
    assert shown(date(2026, 1, 5)) == "2026-01-05"
    assert shown("2026-01-05T14:03:07+00:00", "seconds") == "2026-01-05 14:03:07"  # as JSON keeps it
    assert shown(None) == shown("") == shown("not a date") == ""
    assert time_element(at) == '<time datetime="2026-01-05T14:03:07+00:00">2026-01-05 14:03</time>'
    assert time_element(None) == ""


def test_templates_print_dates_only_through_the_dates_library():
    """No template formats a date itself: a new page cannot bring back a second format."""
    own = re.compile(r"\|(date|time|naturaltime|naturalday|timesince|timeuntil)\b")
    bare = re.compile(r"\{\{ *[\w.]+(_at|_until|date_joined|last_login)( *\| *default[^}]*)? *\}\}")
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        assert not own.search(text), f"{path}: print dates with |when (load dates)"
        assert not bare.search(text), f"{path}: a date printed with Django's default format; use |when"
        if "|when" in text:
            assert re.search(r"\{% load [^%]*\bdates\b", text), f"{path} uses |when without {{% load dates %}}"


def _times(body: str) -> list[tuple[str, str]]:
    assert not OTHER_FORMATS.search(body), OTHER_FORMATS.search(body)
    found = TIME.findall(body)
    for iso, text in found:
        assert SHOWN.fullmatch(text), (iso, text)
        at = datetime.fromisoformat(iso)
        assert text in (shown(at), shown(at, "seconds"), shown(at, "day"), shown(at, "time")), (iso, text)
    return found


def test_pages_show_dates_in_one_format(client_for, users):
    job = make_job(status=JobStatus.SUCCEEDED)
    job.finished_at = timezone.now()
    job.save(update_fields=["finished_at"])
    t = make_trajectory(judge=verdict(passed=True, score=0.9), job=job)
    review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    make_trajectory(judge=verdict(passed=False, score=0.2))  # waits in the queue
    admin = client_for("admin")
    pages = {
        "/": "the dashboard's recently finished jobs",
        "/review/": "the queue's Created column",
        f"/trajectories/{t.pk}/": "a review and a revision",
        "/jobs/": "the jobs' created and finished times",
        f"/jobs/{job.pk}/": "a job's head",
        "/users/": "last logins",
        "/audit-log/": "the events",
    }
    for url, what in pages.items():
        response = admin.get(url)
        assert response.status_code == 200, url
        assert _times(response.content.decode()), f"{url}: no <time> for {what}"
    # The dashboard's per-day chart labels its days the same way (SVG text, no element).
    body = admin.get("/").content.decode()
    today = shown(timezone.now(), "day")
    assert f">{today}</text>" in body
