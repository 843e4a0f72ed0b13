"""`manage.py queue`'s parts: parameters read from NAME=VALUE pairs by the kind's serializer, the kinds and their
parameters described for --help, and `--wait` with a progress bar and a summary."""

import json
import sys
import time
from pathlib import Path

from django.core.management.base import CommandError
from rest_framework import serializers
from rest_framework.fields import empty
from tqdm import tqdm

from simia_web.core.errors import ValidationFailed
from simia_web.core.json_input import JsonRefused, json_parse

from .kinds import JobKind, job_kinds_queueable
from .models import Job, JobStatus
from .selectors import job_progress, job_summary

STRUCTURED = (serializers.DictField, serializers.JSONField)


# Between two progress lines when the output is not a terminal (a log file, CI): a line a frame would flood it.
LOG_LINE_SECONDS = 10.0


def job_wait(job: Job, stdout, poll: float = 0.5, progress_to=None) -> Job:
    """Block until the job ends, showing progress; raise CommandError when it failed or was cancelled (one
    that finished with errors says what they were, on stderr).

    Progress goes to stderr (`progress_to`): on a terminal, a bar redrawn in place (Django's output wrapper would
    end each redraw with a newline); elsewhere, a line about every LOG_LINE_SECONDS and when the job ends. The
    summary goes to `stdout`."""
    progress_to = progress_to or sys.stderr
    on_terminal = progress_to.isatty()
    bar = tqdm(
        total=0, unit="unit", file=progress_to, dynamic_ncols=True, desc=f"job {job.pk}", disable=not on_terminal
    )
    next_line = 0.0
    while True:
        job.refresh_from_db()
        progress = job_progress(job)
        total = sum(s["total"] for s in progress.values())
        finished = sum(s["done"] + s["errored"] + s["failed"] + s["cancelled"] for s in progress.values())
        state = f"{job.status} {job.stage}".strip()
        if on_terminal:
            bar.total = max(total, 1)
            bar.n = finished
            bar.set_postfix_str(state)
            bar.refresh()
        elif time.monotonic() >= next_line or not job.is_active:
            progress_to.write(f"job {job.pk}: {state}, {finished}/{total} units\n")
            progress_to.flush()
            next_line = time.monotonic() + LOG_LINE_SECONDS
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


def parameters_from_pairs(job_kind: JobKind, pairs: list[str]) -> dict:
    """The parameters given as NAME=VALUE (a dash in NAME is an underscore), as text for the kind's serializer to
    judge: each pair for a list parameter adds an item, a dict parameter's VALUE is JSON, and VALUE @PATH is the
    text of that file. ValidationFailed naming what cannot be read."""
    rules = job_kind.parameters_serializer()().fields
    values: dict = {}
    for pair in pairs:
        name, equals, text = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or name not in rules:
            raise ValidationFailed(f"{pair!r}: expected NAME=VALUE, NAME one of {', '.join(rules)}", field="param")
        value = _file_text(name, text[1:]) if text.startswith("@") else text
        rule = rules[name]
        if isinstance(rule, serializers.ListField):
            values.setdefault(name, []).append(value)
        elif isinstance(rule, STRUCTURED):
            values[name] = _json(name, value)
        else:
            values[name] = value
    return values


def _file_text(name: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationFailed(f"cannot read {path}: {exc}", field=name) from None


def _json(name: str, text: str):
    try:
        return json_parse(text, where=name)
    except JsonRefused as exc:
        raise ValidationFailed(f"not JSON: {exc}", field=name) from None


def kinds_described() -> str:
    """Every kind that can be queued, with its parameters: type, bounds, default and help, for --help."""
    lines = ["kinds and their parameters (--param NAME=VALUE):"]
    for name, job_kind in job_kinds_queueable().items():
        lines += ["", f"{name}: {job_kind.label}"]
        for param, rule in job_kind.parameters_serializer()().fields.items():
            if not rule.read_only:
                lines.append(f"  {param:<14} {_rule_said(rule)}" + (f". {rule.help_text}" if rule.help_text else ""))
    lines += [
        "",
        "A list takes one --param per item (repeat it); a dict takes JSON; a VALUE @PATH is read from that file.",
    ]
    return "\n".join(lines)


def _rule_said(rule: serializers.Field) -> str:
    said = _type_said(rule)
    bounds = [getattr(rule, attr, None) for attr in ("min_value", "max_value")]
    if any(bound is not None for bound in bounds):
        said += f" {'' if bounds[0] is None else bounds[0]}..{'' if bounds[1] is None else bounds[1]}"
    if rule.required:
        return f"{said}; required"
    return f"{said}; default {rule.default}" if rule.default not in (empty, None, "") else f"{said}; optional"


def _type_said(rule: serializers.Field) -> str:
    if isinstance(rule, serializers.ListField):
        return f"list of {_type_said(rule.child)}"
    if isinstance(rule, STRUCTURED):
        return "JSON object"
    if isinstance(rule, serializers.ChoiceField):
        return f"one of {', '.join(map(str, rule.choices))}"
    for kind, said in (
        (serializers.BooleanField, "true or false"),
        (serializers.IntegerField, "integer"),
        (serializers.FloatField, "number"),
        (serializers.SlugField, "slug"),
    ):
        if isinstance(rule, kind):
            return said
    return "text"
