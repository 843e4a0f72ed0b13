"""Exports that keep one trajectory per near-duplicate cluster: which one, how many were removed (report and card),
and how many matching trajectories the index does not hold."""

import json

import pytest

from simia_web.curation.models import Trajectory
from simia_web.curation.services import review_decide
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import ExportOptions, export_write
from tests.dedup.test_index import near, said, words
from tests.exports.test_parquet_and_card import _built, _card, _folder
from tests.support.factories import make_trajectory, verdict


@pytest.fixture
def world(db, users):
    """Three near-copies and one unrelated conversation, all accepted: the copy with the highest judge score was
    accepted last; one more accepted trajectory the index does not hold."""
    text = words(30)
    copies = [
        make_trajectory(messages=said(near(text, 5 + i)), judge=verdict(score=score))
        for i, score in enumerate((0.6, 0.7, 0.9))
    ]
    unrelated = make_trajectory(messages=said(words(31)), judge=verdict(score=0.8))
    for t in (copies[1], copies[0], unrelated, copies[2]):
        review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    unindexed = Trajectory.objects.create(
        kind="rollout", domain=unrelated.domain, status="accepted", messages=said(words(32)), tools=unrelated.tools
    )
    return {"copies": copies, "unrelated": unrelated, "unindexed": unindexed}


def _written(tmp_path, dedup: str) -> tuple[list[int], dict, str]:
    path = tmp_path / dedup / "data.jsonl"
    export_write(
        format="openai",
        filters=export_filters_clean({}),
        path=path,
        options=ExportOptions(card=True, dedup=dedup),
    )
    manifest = [json.loads(line) for line in (path.parent / "data.manifest.jsonl").read_text().splitlines()]
    report = json.loads((path.parent / "data.report.json").read_text())
    return sorted(line["trajectory_id"] for line in manifest), report, (path.parent / "README.md").read_text()


@pytest.mark.parametrize("dedup, kept", [("accepted_first", 1), ("highest_score", 2)])
def test_an_export_keeps_one_per_cluster_and_says_how_many_it_removed(world, tmp_path, dedup, kept):
    ids, report, card = _written(tmp_path, dedup)
    expected = sorted([world["copies"][kept].pk, world["unrelated"].pk, world["unindexed"].pk])
    assert ids == expected
    assert report["records"] == 3
    assert report["near_duplicates"]["removed"] == 2 and report["near_duplicates"]["not_indexed"] == 1
    assert "Near-duplicates removed: 2." in card


def test_without_the_option_nothing_is_removed_and_the_card_says_not_measured(world, tmp_path):
    path = tmp_path / "all.jsonl"
    result = export_write(
        format="openai", filters=export_filters_clean({}), path=path, options=ExportOptions(card=True)
    )
    assert result.stats.count == 5 and result.stats.facts.duplicates is None
    assert json.loads((tmp_path / "all.report.json").read_text())["near_duplicates"] is None
    assert "Near-duplicates removed: not measured" in (tmp_path / "README.md").read_text()


def test_a_snapshot_takes_the_option_over_rest_and_refuses_an_unknown_rule(world, eager, settings, client_for):
    snapshot = _built("openai", {"status": "accepted"}, {"dedup": "highest_score"})
    assert snapshot.count == 3 and snapshot.options == {"dedup": "highest_score"}
    _, body = _card(_folder(settings, snapshot))
    assert "Near-duplicates removed: 2." in body

    client = client_for("curator")
    response = client.post(
        "/api/v1/snapshots/", {"format": "openai", "options": {"dedup": "newest"}}, content_type="application/json"
    )
    assert response.status_code == 400 and "dedup" in response.content.decode()
    response = client.post(
        "/api/v1/snapshots/",
        {"format": "openai", "options": {"dedup": "accepted_first"}},
        content_type="application/json",
    )
    assert response.status_code == 202 and response.json()["options"] == {"dedup": "accepted_first"}


def test_a_snapshot_in_parts_reads_its_near_duplicates_once_and_each_part_leaves_out_its_own(
    world, eager, settings, monkeypatch
):
    from simia_web.exports import job_kinds, selectors

    settings.EXPORT_RANGE_RECORDS = 1  # a part a record
    reads = []
    real = selectors.near_duplicates_to_drop

    def counted(queryset, keep):
        reads.append(keep)
        return real(queryset, keep)

    monkeypatch.setattr(selectors, "near_duplicates_to_drop", counted)
    snapshot = _built("openai", {"status": "accepted"}, {"dedup": "highest_score"})

    assert reads == ["highest_score"]  # at planning, not in every part nor again in the merge
    kept = sorted([world["copies"][2].pk, world["unrelated"].pk, world["unindexed"].pk])
    parts = list(snapshot.job.units.filter(stage=job_kinds.BUILD).order_by("key"))
    assert [unit.result["count"] for unit in parts] == [1, 1, 1]
    left_out = sorted(pk for unit in parts for pk in unit.params["left_out"])
    assert left_out == sorted(t.pk for t in world["copies"][:2])
    assert snapshot.job.units.get(stage=job_kinds.MERGE).params["removed"] == 2
    manifest = snapshot.file_entry("manifest")
    lines = (settings.EXPORTS_DIR / manifest["path"]).read_text().splitlines()
    assert sorted(json.loads(line)["trajectory_id"] for line in lines) == kept
    report = json.loads((settings.EXPORTS_DIR / snapshot.file_entry("report")["path"]).read_text())
    assert report["near_duplicates"] == {"keep": "highest judge score", "removed": 2, "not_indexed": 1}
