"""The dashboard's first steps: each ticks itself when done, the panel goes once all are, the demo's data ticks
none of them, and it costs a fixed handful of queries; `demo_data` (run by `make run`) says whether an LLM endpoint
is configured and where to set one."""

from io import StringIO

from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.models import default_workspace_id
from simia_web.catalog.models import DomainSource
from simia_web.catalog.services import domain_ensure
from simia_web.curation.selectors.first_steps import first_steps
from simia_web.curation.services import review_decide
from simia_web.jobs.models import Job, JobStatus
from simia_web.llm.models import EndpointProfile
from simia_web.synthesis.demo.loader import demo_load
from tests.support.factories import make_trajectory


def _passed(profile):
    profile.capabilities = {
        "endpoint": f"{profile.base_url} {profile.model}",
        "checked_at": "2026-01-01T00:00:00+00:00",
        "evidence": [{"name": "json_schema", "status": 200, "verdict": "honoured", "detail": ""}],
    }
    profile.save()


def test_each_step_ticks_itself(client_for, users):
    demo_load()  # the demo's domains and reviews are nobody's first steps
    steps = first_steps(workspace_ids=[default_workspace_id()])
    assert not (steps.llm or steps.domain or steps.job or steps.review or steps.export)
    page = client_for("admin").get("/").content.decode()
    assert 'id="first-steps"' in page and "No endpoint has passed a test yet" in page
    assert 'href="/llm/endpoints/"' in page
    curator_page = client_for("curator").get("/").content.decode()
    assert "ask an admin" in curator_page
    assert 'id="first-steps"' not in client_for("annotator").get("/").content.decode()

    _passed(EndpointProfile.objects.create(name="local", base_url="http://127.0.0.1:9/v1", model="m"))
    domain_ensure(name="mine", source=DomainSource.MANUAL)
    Job.objects.create(kind="synthesize", params={})
    trajectory = make_trajectory()
    review_decide(trajectory=trajectory, reviewer=users["annotator"], decision="accept", expected_version=1)
    steps = first_steps(workspace_ids=[default_workspace_id()])
    assert (steps.llm, steps.domain, steps.job, steps.review, steps.export) == (True, True, True, True, False)
    Job.objects.create(kind="export", params={}, status=JobStatus.SUCCEEDED)
    assert first_steps(workspace_ids=[default_workspace_id()]).all_done
    assert 'id="first-steps"' not in client_for("admin").get("/").content.decode()


def test_the_steps_cost_a_fixed_handful_of_queries(db):
    default = [default_workspace_id()]
    with CaptureQueriesContext(connection) as queries:
        first_steps(workspace_ids=default)
    assert len(queries) <= 5


def test_demo_data_says_where_to_set_an_endpoint(db, settings, monkeypatch):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = StringIO()
    call_command("demo_data", stdout=out)
    assert "LLM endpoint: none configured" in out.getvalue() and "/llm/endpoints/" in out.getvalue()
    profile = EndpointProfile.objects.create(name="local", base_url="http://127.0.0.1:9/v1", model="m")
    call_command("demo_data", stdout=(out := StringIO()))
    assert "has not passed a test: press Test" in out.getvalue()
    _passed(profile)
    call_command("demo_data", stdout=(out := StringIO()))
    assert "local (m at http://127.0.0.1:9/v1) passed its test" in out.getvalue()


def test_chart_legends_name_statuses_as_the_badges_do():
    from simia_web.curation import charts

    chart = charts.stacked_bar({"shop": {"judged_fail": 2, "accepted": 1}}, charts.STATUS_COLOURS)
    legend = [label for label, _cls in chart["legend"]]
    assert "Judge: fail" in legend and "judged_fail" not in legend
    assert {s["key"] for s in chart["rows"][0]["segments"]} == {"Judge: fail", "Accepted"}
    verdicts = charts.stacked_bar({"shop": {"pass": 1}}, charts.VERDICT_COLOURS)
    assert [label for label, _cls in verdicts["legend"]] == ["Judge: pass", "Judge: fail", "Not judged"]


def test_per_day_chart_with_one_day_draws_its_points_whole(client_for, users):
    """One day of data: the points sit in the middle under one day label, and the largest is not cut by the top."""
    from datetime import date

    from simia_web.curation import charts

    chart = charts.line_chart({"ann": [(date(2026, 1, 5), 4.0)], "cur": [(date(2026, 1, 5), 1.0)]})
    dots = [dot for line in chart["lines"] for dot in line["dots"]]
    assert {dot["x"] for dot in dots} == {chart["middle"]}
    assert all(3 <= dot["y"] <= chart["plot_bottom"] for dot in dots)  # radius 3 inside the drawing
    many = charts.line_chart({"ann": [(date(2026, 1, 5), 4.0), (date(2026, 1, 6), 2.0)]})
    assert min(dot["y"] for dot in many["lines"][0]["dots"]) >= 3 and not many["one_day"]

    review_decide(trajectory=make_trajectory(), reviewer=users["annotator"], decision="accept", expected_version=1)
    body = client_for("annotator").get("/").content.decode()
    svg = body[body.index('id="chart-throughput"') :]
    svg = svg[: svg.index("</svg>")]
    assert svg.count('text-anchor="middle"') == 1 and 'cy="6.0"' in svg
