"""The embedded default (SQLite) answers every page and REST route that PostgreSQL does, with data in every feature,
and PostgreSQL-only ORM features appear only in modules that say how they fall back elsewhere."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.route_walk import feature_data, walk

ROOT = Path(__file__).resolve().parents[2]
# ORM features only PostgreSQL runs (or runs this way); a module using one names its fallback with PORTABLE_MARK.
POSTGRES_ONLY = re.compile(
    r"\.distinct\(\s*[\"']|ArrayAgg|StringAgg|JSONBAgg|BoolAnd|BoolOr|SearchVector\b|SearchQuery|SearchRank|"
    r"TrigramSimilarity|ArrayField|HStoreField|select_for_update\(\s*skip_locked"
)
PORTABLE_MARK = "Portable fallback:"


def test_every_route_answers_on_postgres_with_data_in_every_feature(client, users):
    from simia_web.curation.duplicates import TRAJECTORIES
    from simia_web.dedup.models import Signature

    client.force_login(users["admin"])
    data = feature_data(users)
    clusters = Signature.objects.filter(corpus=TRAJECTORIES, item_id__in=[t.pk for t in data["near_duplicates"]])
    found = set(clusters.values_list("cluster", flat=True))
    assert len(found) == 1 and None not in found  # the walk shows a near-duplicate cluster
    assert walk(client, data) == []


def test_every_route_answers_on_the_embedded_default_with_data_in_every_feature(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(SIMIA_VAR_DIR=str(tmp_path), DATABASE_URL=f"sqlite:///{tmp_path / 'walk.sqlite3'}")
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.route_walk"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip(), done.stderr[-5000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failures"] == [], done.stderr[-5000:]
    assert result["routes"] > 50 and done.returncode == 0


@pytest.mark.parametrize("path", sorted((ROOT / "simia_web").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_postgres_only_orm_features_are_used_only_where_a_fallback_is_named(path):
    if "migrations" in path.parts:
        return
    text = path.read_text(encoding="utf-8")
    if POSTGRES_ONLY.search(text):
        assert PORTABLE_MARK in text, f"{path}: uses {POSTGRES_ONLY.search(text).group(0)}; say '{PORTABLE_MARK} ...'"
