"""A bulk decision too large to undo within a request is taken back by a job, from its notice's Undo or from the
Undo on a bulk-decision job's page: the curator lands on the undo job's page, which says what it undid."""

import uuid

import pytest
from playwright.sync_api import expect

from simia_web.curation.models import Decision, Review, TrajectoryStatus
from simia_web.curation.services import BULK_UNDO_JOB_KIND, reviews_bulk_queue
from simia_web.jobs.models import Job
from tests.browser.conftest import bulk_over_the_filter
from tests.browser.test_accessibility import blocking_violations
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.browser


@pytest.fixture
def failed(db):
    """60 items the judge failed: more than a request undoes at once (50)."""
    return [make_trajectory(judge=verdict(passed=False)).pk for _ in range(60)]


def test_the_notice_of_a_large_bulk_decision_undoes_it_in_a_job(eager, login, failed):
    page = login("curator")
    page.goto("/review/?verdict=fail&status=all")
    bulk_over_the_filter(page, "reject", "off-policy")
    expect(page.locator("#bulk-confirm")).to_contain_text("in a job")
    page.click("#confirm-bulk")
    expect(page.locator("#bulk-toast")).to_contain_text("60")
    assert Review.objects.filter(bulk=True, undone_at__isnull=True).count() == 60

    page.click("#bulk-toast #undo-btn")

    undo = Job.objects.get(kind=BULK_UNDO_JOB_KIND)
    page.wait_for_url(f"**/jobs/{undo.pk}/")
    expect(page.locator("#job-status")).to_have_text("succeeded")
    assert not Review.objects.filter(bulk=True, undone_at__isnull=True).exists()
    assert set(TrajectoryStatus(s) for s in Review.objects.values_list("trajectory__status", flat=True)) == {
        TrajectoryStatus.JUDGED_FAIL
    }


def test_a_bulk_decision_job_page_offers_its_undo_to_curators(eager, login, users, failed):
    decided = reviews_bulk_queue(query="verdict=fail&status=all", reviewer=users["curator"], decision=Decision.ACCEPT)
    batch = uuid.UUID(decided.params["batch"])
    page = login("curator")
    page.goto(f"/jobs/{decided.pk}/")
    expect(page.locator("#job-bulk-undo")).to_contain_text("60 decisions")
    assert blocking_violations(page) == []

    page.click("#bulk-job-undo")

    undo = Job.objects.get(kind=BULK_UNDO_JOB_KIND)
    page.wait_for_url(f"**/jobs/{undo.pk}/")
    expect(page.locator("#job-status")).to_have_text("succeeded")
    assert Review.objects.filter(batch=batch, undone_at__isnull=False).count() == 60
