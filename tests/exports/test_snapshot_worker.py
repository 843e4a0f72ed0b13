"""A snapshot requested over the API, built by a real Celery worker, downloaded and checked."""

import hashlib
import io
import json
import zipfile

import pytest

from simia_web.accounts.services import user_token
from simia_web.curation.models import TrajectoryStatus
from simia_web.formats.sharegpt import sharegpt_problems
from tests.conftest import wait_for
from tests.exports.data import conversation, domain_make, trajectory_make

pytestmark = pytest.mark.integration


def test_snapshot_job_over_the_api_on_a_real_worker(celery_worker, users, client, settings, tmp_path):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    settings.EXPORTS_DIR = tmp_path / "exports"
    celery_worker(concurrency=2, SIMIA_EXPORTS_DIR=str(settings.EXPORTS_DIR))
    shop = domain_make()
    for i in range(5):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    trajectory_make(shop, status=TrajectoryStatus.REJECTED)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {user_token(user=users['curator'])}"

    response = client.post("/api/v1/snapshots/", {"format": "sharegpt", "filters": {}}, "application/json")
    assert response.status_code == 202, response.content
    snapshot_id = response.json()["id"]

    def built():
        body = client.get(f"/api/v1/snapshots/{snapshot_id}/").json()
        return body if body["status"] not in ("queued", "running") else None

    body = wait_for(built, timeout=60, message="the snapshot job to finish")
    assert body["status"] == "succeeded", body
    assert body["count"] == 5 and body["refused_count"] == 0 and body["created_by"] == "curator"

    download = client.get(f"/api/v1/snapshots/{snapshot_id}/download/")
    assert download.status_code == 200
    data = b"".join(download.streaming_content)
    assert len(data) == body["bytes"]
    assert hashlib.sha256(data).hexdigest() == body["sha256"] == download["X-Checksum-SHA256"]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        rows = [json.loads(line) for line in archive.read("data.jsonl").splitlines()]
        assert "dataset_info.json" in archive.namelist()
    assert len(rows) == 5 and all(sharegpt_problems(row) == [] for row in rows)
