"""The exports page: statuses chosen from a list, a snapshot certified by an audit from the form (refused on the form
above the ceiling), and the dataset card read on the snapshot's page, its Markdown rendered and any HTML in it shown
as text."""

import pytest

from simia_web.audits.services import audit_create
from simia_web.core.markdown import markdown_html
from simia_web.curation.models import TrajectoryStatus
from simia_web.exports.models import Snapshot
from simia_web.exports.services import snapshot_create
from tests.audits.test_audit_services import decide, population
from tests.exports.data import domain_make, trajectory_make


def test_markdown_is_rendered_without_markup_of_its_own():
    html = markdown_html(
        "---\nlicense: mit\n---\n# Card\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<script>alert(1)</script>\n\n"
        "[x](javascript:alert(1)) ![plot](images/turns.png)"
    )
    assert "<h1>Card</h1>" in html and "<table>" in html and "license" not in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html and '<img src="images/turns.png"' in html


def test_the_dataset_card_is_read_on_the_snapshot_page(eager, settings, tmp_path, client_for):
    settings.EXPORTS_DIR = tmp_path / "exports"
    trajectory_make(domain_make())
    snapshot = snapshot_create(format="openai", filters={"status": "all"})
    page = client_for("annotator").get(f"/exports/{snapshot.pk}/").content.decode()
    card = page[page.index('id="snapshot-card"') :]
    assert "<summary>Dataset card</summary>" in page and "<h1" in card
    assert f'src="/api/v1/snapshots/{snapshot.pk}/download/?name=images' in card  # the plots, fetchable


def test_statuses_are_chosen_from_a_list(client_for, db):
    page = client_for("curator").get("/exports/").content.decode()
    select = page[page.index('<select name="status" id="export-status">') :]
    select = select[: select.index("</select>")]
    for status in [*TrajectoryStatus.values, "all"]:
        assert f'value="{status}"' in select
    assert '<option value="accepted" selected>' in select


def test_an_unknown_status_says_why_there_is_no_count(client_for, db):
    """An old link's unknown status does not make the count vanish silently: the page names the filter."""
    page = client_for("curator").get("/exports/", {"status": "judged_bad"}).content.decode()
    assert 'id="export-matching"' not in page
    notice = page[page.index('id="export-filters-invalid"') :]
    notice = notice[: notice.index("</p>")]
    assert "status:" in notice and "judged_bad" in notice
    assert 'id="export-filters-invalid"' not in client_for("curator").get("/exports/").content.decode()


@pytest.mark.django_db
def test_a_snapshot_is_certified_by_an_audit_from_the_form_and_refused_on_it_above_the_ceiling(
    client_for, users, settings, tmp_path
):
    settings.EXPORTS_DIR = tmp_path / "exports"
    population(40)
    audit = audit_create(filters={}, sample_size=20, strategy="uniform", seed=3, actor=users["curator"])
    decide(audit, users["annotator"], reject_every=4)
    client = client_for("curator")
    form = {"action": "build", "format": "openai", "status": "all", "audit": str(audit.pk)}
    too_low = client.post("/exports/", {**form, "max_error_rate": "0.01"})
    assert too_low.status_code == 400 and "ceiling" in too_low.content.decode()
    assert not Snapshot.objects.exists()
    not_a_number = client.post("/exports/", {**form, "max_error_rate": "five"})
    assert not_a_number.status_code == 400 and "give the ceiling as a share" in not_a_number.content.decode()
    built = client.post("/exports/", {**form, "max_error_rate": "0.9"})
    assert built.status_code == 302
    snapshot = Snapshot.objects.get()
    assert snapshot.options["certify"] == {"audit": audit.pk, "max_error_rate": 0.9}
