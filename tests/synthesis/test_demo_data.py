"""The demo data `make run` loads: two domains, judged trajectories and a few human reviews."""

import pytest
from django.core.management import call_command

from simia_web.curation.models import Review, Trajectory
from simia_web.synthesis.selectors import stats


@pytest.mark.django_db
def test_demo_data_loads_once_and_fills_every_page(client_for):
    call_command("demo_data")
    call_command("demo_data")
    counts = stats()
    assert counts["domains"] == 2 and counts["apis"] == 7 and counts["tasks"] == 4
    assert sum(counts["trajectories"].values()) == Trajectory.objects.count() == 5
    assert Review.objects.count() == 4
    curator = client_for("curator")
    for url in ("/", "/review/", "/agreement/", "/domains/", "/domains/travel/", "/apis/", "/tasks/"):
        assert curator.get(url).status_code == 200, url
    agreement = curator.get("/agreement/").content.decode()
    assert "kappa" in agreement.lower()
