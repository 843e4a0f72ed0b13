"""Every list page and its REST list read one selector over one FilterSet: the same query string finds the same
rows on both, the pages' old yes/no links still work, and a page's queries do not grow with its rows."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Api, ApiKind, Domain, DomainSource, Seed, SeedFormat, Task, TaskStatus
from simia_web.exports.models import ExportFormat, Snapshot
from simia_web.jobs.models import Job
from tests.exports.data import TOOLS, conversation

pytestmark = pytest.mark.django_db
API = "/api/v1"


@pytest.fixture
def rows(users):
    """Two domains of every shape a filter tells apart; `n` APIs, tasks, seeds and snapshots more on request."""
    shop = Domain.objects.create(name="shop", description="Orders and refunds", source=DomainSource.TAU2)
    bank = Domain.objects.create(name="bank", description="Accounts", source=DomainSource.MANUAL)
    Domain.objects.create(name="travel", description="Flights, not refunds", source=DomainSource.SYNTHESIZED)
    Api.objects.bulk_create(
        [
            Api(domain=shop, name="get_order", description="Look up an order", kind=ApiKind.READ),
            Api(domain=shop, name="refund", description="Money back to the card", kind=ApiKind.WRITE),
            Api(domain=shop, name="broken", description="Refund, badly", valid=False, errors=["bad schema"]),
            Api(domain=bank, name="get_balance", description="An account's balance", kind=ApiKind.READ),
        ]
    )
    Task.objects.bulk_create(
        [
            Task(domain=shop, instruction="Refund order W1"),
            Task(domain=shop, instruction="Where is W2?", status=TaskStatus.DUPLICATE),
            Task(domain=bank, instruction="Balance please", status=TaskStatus.REJECTED),
        ]
    )
    Seed.objects.bulk_create(
        [
            Seed(domain=shop, source_format=SeedFormat.OPENAI, messages=conversation(), tools=TOOLS, content_hash="a"),
            Seed(domain=shop, source_format=SeedFormat.SHAREGPT, usable=False, problems=["x"], content_hash="b"),
            Seed(domain=bank, source_format=SeedFormat.TAU2, messages=conversation(), content_hash="c"),
        ]
    )
    for chosen in (ExportFormat.OPENAI, ExportFormat.PARQUET, ExportFormat.OPENAI):
        Snapshot.objects.create(format=chosen, job=Job.objects.create(kind="export"), created_by=users["curator"])
    return {"shop": shop, "bank": bank}


@pytest.fixture
def api_get(client, users):
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {user_token(user=users['annotator'])}"

    def get(path: str) -> list[int]:
        response = client.get(path)
        assert response.status_code == 200, response.content[:300]
        return sorted(row["id"] for row in response.json()["results"])

    return get


def page_ids(client, path: str) -> list[int]:
    response = client.get(path, follow=True)
    assert response.status_code == 200, response.content[:300]
    return sorted(row.pk for row in response.context["page"].object_list)


LISTS = {
    "/domains/": ["", "q=refund", "q=ACCOUNTS", "source=tau2", "source=manual&q=acc", "q=nothing-matches"],
    "/apis/": [
        "",
        "domain=shop",
        "valid=true",
        "valid=false",
        "q=refund",  # a name and two descriptions
        "q=card",  # a description only
        "domain=shop&valid=true&q=order",
        "kind=write",
        "domain=nowhere",
    ],
    "/tasks/": ["", "domain=shop", "status=duplicate", "status=valid&domain=shop", "q=w1", "domain=bank&q=BALANCE"],
    "/seeds/": ["", "domain=shop", "usable=true", "usable=false", "source_format=tau2", "domain=shop&usable=true"],
}


@pytest.mark.parametrize(("path", "query"), [(path, query) for path, queries in LISTS.items() for query in queries])
def test_a_query_string_finds_the_same_rows_on_the_page_and_in_the_api(rows, client_for, api_get, path, query):
    on_page = page_ids(client_for("annotator"), f"{path}?{query}")
    assert on_page == api_get(f"{API}{path}?{query}")
    assert on_page or "nowhere" in query or "nothing" in query, "every other query matches something"


@pytest.mark.parametrize("query", ["", "format=openai", "format=parquet", "format=sharegpt"])
def test_the_snapshot_list_filters_as_the_api_does(rows, client_for, api_get, query):
    on_page = page_ids(client_for("annotator"), f"/exports/?{query}")
    assert on_page == api_get(f"{API}/snapshots/?{query}")
    assert len(on_page) == {"": 3, "format=openai": 2, "format=parquet": 1, "format=sharegpt": 0}[query]


def test_q_searches_names_and_descriptions_of_apis_and_domains(rows, api_get):
    names = dict(Api.objects.values_list("pk", "name"))
    assert {names[pk] for pk in api_get(f"{API}/apis/?q=refund")} == {"refund", "broken"}
    domains = dict(Domain.objects.values_list("pk", "name"))
    assert {domains[pk] for pk in api_get(f"{API}/domains/?q=refund")} == {"shop", "travel"}


def test_a_domain_counts_every_api_task_and_seed_on_its_page_and_in_the_api(rows, client_for, client, users):
    body = client_for("annotator").get("/domains/?q=shop").content.decode()
    for kind, n in (("apis", 3), ("tasks", 2), ("seeds", 2)):
        assert f'href="/{kind}/?domain=shop">{n}</a>' in body
    shop = client.get(f"{API}/domains/?q=shop").json()["results"][0]
    assert (shop["api_count"], shop["task_count"], shop["seed_count"]) == (3, 2, 2)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/apis/?valid=yes", "/apis/?valid=true"),
        ("/apis/?domain=shop&valid=no&q=x", "/apis/?domain=shop&valid=false&q=x"),
        ("/seeds/?usable=yes", "/seeds/?usable=true"),
        ("/seeds/?usable=no&domain=bank", "/seeds/?usable=false&domain=bank"),
    ],
)
def test_the_pages_old_yes_no_links_redirect_to_true_false(rows, client_for, old, new):
    response = client_for("annotator").get(old)
    assert response.status_code == 301 and response["Location"] == new


def test_the_filter_forms_offer_the_api_spelling(rows, client_for):
    client = client_for("annotator")
    body = client.get("/apis/?valid=false&kind=write").content.decode()
    assert '<option value="false" selected>Invalid</option>' in body
    assert '<option value="write" selected>' in body
    body = client.get("/seeds/?usable=true&source_format=tau2").content.decode()
    assert '<option value="true" selected>Usable</option>' in body and '<option value="tau2" selected>' in body
    body = client.get("/domains/?source=tau2&q=ord").content.decode()
    assert '<option value="tau2" selected>' in body and 'value="ord"' in body
    # A job's rows, reached from its page, keep the job when the form narrows them further.
    assert '<input type="hidden" name="job" value="7">' in client.get("/tasks/?job=7").content.decode()


def test_a_value_the_filter_does_not_know_is_left_out_on_a_page_and_refused_by_the_api(rows, client_for, client):
    everything = page_ids(client_for("annotator"), "/tasks/")
    assert page_ids(client, "/tasks/?status=lost") == everything
    response = client.get(f"{API}/tasks/?status=lost")
    assert response.status_code == 400 and "status" in response.json()


def _more_rows(domains, n: int) -> None:
    for domain in domains:
        Api.objects.bulk_create([Api(domain=domain, name=f"api_{domain.name}_{i}") for i in range(n)])
        Task.objects.bulk_create([Task(domain=domain, instruction=f"task {i}") for i in range(n)])
        Seed.objects.bulk_create(
            [Seed(domain=domain, source_format=SeedFormat.OPENAI, content_hash=f"{domain.name}{i}") for i in range(n)]
        )
    for _ in range(n):
        Snapshot.objects.create(format=ExportFormat.OPENAI, job=Job.objects.create(kind="export"))


LIST_PAGES = [
    "/domains/",
    "/apis/",
    "/tasks/",
    "/seeds/",
    "/exports/",
    "/apis/?valid=true&domain=shop",
    "/seeds/?domain=shop",
]


@pytest.mark.parametrize("path", LIST_PAGES)
def test_a_list_page_reads_in_a_fixed_number_of_queries(rows, client_for, django_assert_num_queries, path):
    """Session and user, the user's workspaces (the header's switcher), the count, the rows (with their domain
    joined), the filter's choices: the same few queries for 60 rows as for 3 (the exports page also counts the
    trajectories a new snapshot would take)."""
    client = client_for("annotator")
    client.get(path)  # the first request of a session reads what later ones find cached
    with CaptureQueriesContext(connection) as few:
        assert client.get(path).status_code == 200
    _more_rows(Domain.objects.all(), 20)
    with django_assert_num_queries(len(few.captured_queries)):
        assert client.get(path).status_code == 200
    assert len(few.captured_queries) <= 7
