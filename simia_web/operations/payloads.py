"""The `data` of each webhook event: ids, statuses and counts, never trajectory text."""

from django.urls import reverse


def _time(value) -> str | None:
    return value.isoformat() if value else None


def job_payload(job, units: dict[str, int]) -> dict:
    return {
        "job": {
            "id": job.pk,
            "kind": job.kind,
            "status": job.status,
            "error": job.error[:1000],
            "created_at": _time(job.created_at),
            "started_at": _time(job.started_at),
            "finished_at": _time(job.finished_at),
            "units": units,
            "trajectories": job.summary.get("trajectories", {}),
            "url": reverse("job-detail", args=[job.pk]),
        }
    }


def snapshot_payload(snapshot) -> dict:
    return {
        "snapshot": {
            "id": snapshot.pk,
            "job": snapshot.job_id,
            "format": snapshot.format,
            "filters": snapshot.filters,
            "count": snapshot.count,
            "refused_count": snapshot.refused_count,
            "bytes": snapshot.bytes,
            "sha256": snapshot.sha256,
            "files": [entry["name"] for entry in snapshot.files],
            "download": reverse("api-snapshot-download", args=[snapshot.pk]),
        }
    }
