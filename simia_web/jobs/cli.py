"""Shared by the management commands that queue jobs: `--wait` with a progress bar and a summary."""

import json
import sys
import time

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from rest_framework.fields import empty
from tqdm import tqdm

from .models import Job, JobStatus
from .pipelines import pipeline_for
from .selectors import job_progress, job_summary
from .services import job_queue


def job_wait(job: Job, stdout, poll: float = 0.5) -> Job:
    """Block until the job ends, drawing progress; raise CommandError when it failed or was cancelled (one
    that finished with errors says what they were, on stderr).

    The bar goes to the terminal's stderr, redrawn in place (Django's output wrapper would end each redraw
    with a newline); the summary goes to `stdout`."""
    bar = tqdm(total=0, unit="unit", file=sys.stderr, dynamic_ncols=True, desc=f"job {job.pk}")
    while True:
        job.refresh_from_db()
        progress = job_progress(job)
        total = sum(s["total"] for s in progress.values())
        finished = sum(s["done"] + s["failed"] + s["cancelled"] for s in progress.values())
        bar.total = max(total, 1)
        bar.n = finished
        bar.set_postfix_str(f"{job.status} {job.stage}".strip())
        bar.refresh()
        if not job.is_active:
            break
        time.sleep(poll)
    bar.close()
    summary = job.summary or job_summary(job)
    stdout.write(f"Job {job.pk} {job.status}.")
    stdout.write(json.dumps(summary, indent=2, sort_keys=True, default=str))
    if job.status == JobStatus.FINISHED_WITH_ERRORS:
        sys.stderr.write(f"job {job.pk} finished with errors: {job.error}\n")
    elif job.status != JobStatus.SUCCEEDED:
        raise CommandError(f"job {job.pk} {job.status}: {job.error or 'see the job page'}")
    return job


def parameter_arguments(parser, kind: str, *names: str) -> None:
    """Add a `--name` option for each of the kind's integer parameters, with its help and default from the
    kind's parameters serializer (the one place that knows them)."""
    fields = pipeline_for(kind).parameters().fields
    for name in names:
        field = fields[name]
        default = "" if field.default is empty else f" (default {field.default})"
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"{field.help_text or name}{default}")


def job_queue_from_command(command, *, kind: str, wait: bool, params: dict) -> Job:
    """Queue a job for a management command (options left unset take the kind's defaults): refused parameters
    become a CommandError naming each one and its limit, `wait` follows the job."""
    try:
        job = job_queue(kind=kind, params={name: value for name, value in params.items() if value is not None})
    except ValidationError as exc:
        messages = exc.message_dict.items() if hasattr(exc, "error_dict") else [("error", exc.messages)]
        raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in messages)) from exc
    command.stdout.write(f"Queued job {job.pk} ({job.kind}). Follow it at /jobs/{job.pk}/ or with --wait.")
    if wait:
        job_wait(job, command.stdout)
    return job
