"""The catalog's and exports' lists in a real browser: their filter forms send the REST API's spelling, an old
link's yes/no still lands on the same list, and the snapshot list narrows to one format."""

import pytest
from playwright.sync_api import expect

from simia_web.catalog.models import Api, ApiKind, Domain
from simia_web.exports.models import ExportFormat, Snapshot
from simia_web.jobs.models import Job

pytestmark = pytest.mark.browser


@pytest.fixture
def apis(transactional_db):
    shop = Domain.objects.create(name="shop", description="Orders and refunds")
    bank = Domain.objects.create(name="bank", description="Accounts")
    Api.objects.bulk_create(
        [
            Api(domain=shop, name="get_order", description="Look up an order", kind=ApiKind.READ),
            Api(domain=shop, name="refund", description="Money back to the card", kind=ApiKind.WRITE),
            Api(domain=shop, name="broken", description="A refund, badly", valid=False, errors=["bad schema"]),
            Api(domain=bank, name="get_balance", description="An account's balance"),
        ]
    )


def test_the_api_list_filters_by_validity_and_searches_descriptions(login, apis):
    page = login("annotator")
    page.goto("/apis/")
    page.select_option("select[name=domain]", "shop")
    page.select_option("select[name=valid]", "false")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**/apis/?*valid=false*")
    expect(page.locator("table code")).to_have_text(["broken"])
    page.select_option("select[name=valid]", "")
    page.fill("input[name=q]", "refund")  # a name, and a description
    page.click("form.filters button[type=submit]")
    expect(page.locator("table code")).to_have_text(["broken", "refund"])

    page.goto("/apis/?domain=shop&valid=yes")  # a bookmark from before the pages spoke true/false
    page.wait_for_url("**/apis/?domain=shop&valid=true")
    expect(page.locator("select[name=valid]")).to_have_value("true")
    expect(page.locator("table code")).to_have_text(["get_order", "refund"])


def test_a_domains_counts_link_to_the_lists_they_count(login, apis):
    page = login("annotator")
    page.goto("/domains/?q=refund")
    page.get_by_role("link", name="3", exact=True).click()
    page.wait_for_url("**/apis/?domain=shop")
    expect(page.locator("table code")).to_have_count(3)


def test_the_snapshot_list_narrows_to_one_format(login, users):
    for chosen in (ExportFormat.OPENAI, ExportFormat.PARQUET):
        Snapshot.objects.create(format=chosen, job=Job.objects.create(kind="export"), created_by=users["curator"])
    page = login("annotator")
    page.goto("/exports/")
    expect(page.locator("#snapshots tr[id^=snapshot-]")).to_have_count(2)
    page.locator("#snapshot-formats").get_by_role("link", name="Parquet").click()
    page.wait_for_url("**/exports/?format=parquet")
    expect(page.locator("#snapshots tr[id^=snapshot-]")).to_have_count(1)
    expect(page.locator("#snapshots tr[id^=snapshot-]")).to_contain_text("Parquet")
    expect(page.locator("#snapshot-formats a[aria-current=page]")).to_contain_text("Parquet")
