"""Operator commands: create_user, the queue command's parameters, and how the settings refuse a public server
without its own key."""

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command, load_command_class
from rest_framework.authtoken.models import Token

from simia_web.accounts.models import User
from simia_web.jobs.cli import parameters_from_pairs
from simia_web.jobs.kinds import job_kinds_queueable

ROOT = Path(__file__).resolve().parents[2]


def test_create_user_with_a_role_and_an_api_token(db):
    out = StringIO()
    call_command("create_user", "ann", "--role", "annotator", "--password", "long-enough-9", "--token", stdout=out)
    user = User.objects.get(username="ann")
    assert user.role == "annotator" and user.check_password("long-enough-9") and not user.is_staff
    assert out.getvalue().splitlines() == ["Created annotator ann in default.", Token.objects.get(user=user).key]


@pytest.mark.parametrize(
    ("username", "password", "reason"),
    [("ann", "x", "too short"), ("not a name!", "long-enough-9", "Enter a valid username")],
)
def test_create_user_refuses_what_the_password_and_username_rules_refuse(db, username, password, reason):
    with pytest.raises(CommandError, match=reason):
        call_command("create_user", username, "--role", "admin", "--password", password)
    assert not User.objects.exists()


def _settings_load(**env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "ALLOWED_HOSTS"}}
    return subprocess.run(
        [sys.executable, "-c", "import simia_web.settings"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_a_secret_key_only_a_local_server_starts(tmp_path):
    assert _settings_load(SIMIA_VAR_DIR=str(tmp_path)).returncode == 0
    public = _settings_load(SIMIA_VAR_DIR=str(tmp_path), ALLOWED_HOSTS="simia.example.com")
    assert public.returncode != 0 and "SECRET_KEY must be set" in public.stderr
    keyed = _settings_load(SIMIA_VAR_DIR=str(tmp_path), ALLOWED_HOSTS="simia.example.com", SECRET_KEY="k" * 50)
    assert keyed.returncode == 0


def test_the_queue_command_takes_each_kinds_parameters_from_its_serializer():
    parser = load_command_class("simia_web.jobs", "queue").create_parser("manage.py", "queue")
    described = parser.format_help()
    assert "synthesize: Synthesis (domains → APIs → tasks → rollouts)" in described
    assert "  apis           integer 1..50; default 8. APIs per domain." in described
    assert "  domains        list of slug; required." in described
    assert "  strategy       one of round_robin, random; default round_robin" in described
    options = parser.parse_args(["rollout", "--param", "domain=shop", "--param", "max-steps=5"])
    job_kind = job_kinds_queueable()[options.kind]
    # As text, for the serializer to judge; what is not given takes the serializer's default.
    assert parameters_from_pairs(job_kind, options.pairs) == {"domain": "shop", "max_steps": "5"}
    pairs = ["domains=a", "domains=b", 'profiles={"judge": 3}']
    assert parameters_from_pairs(job_kinds_queueable()["synthesize"], pairs) == {
        "domains": ["a", "b"],
        "profiles": {"judge": 3},
    }


def test_waiting_writes_a_progress_line_about_every_ten_seconds_when_not_on_a_terminal(db, monkeypatch):
    """A 4-minute wait into a log is some 25 lines, not a thousand carriage-return frames."""
    from simia_web.jobs import cli
    from simia_web.jobs.models import Job, JobStatus

    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    clock = {"now": 0.0}

    def sleep(seconds):
        clock["now"] += seconds
        if clock["now"] >= 240:
            Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED)

    monkeypatch.setattr(cli.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(cli.time, "sleep", sleep)
    log, summary = StringIO(), StringIO()
    cli.job_wait(job, summary, progress_to=log)
    lines = log.getvalue().splitlines()
    assert 24 <= len(lines) <= 26 and "\r" not in log.getvalue()
    assert lines[0] == f"job {job.pk}: running rollout, 0/0 units"
    assert lines[-1] == f"job {job.pk}: succeeded rollout, 0/0 units"
    assert f"Job {job.pk} succeeded." in summary.getvalue()


def test_the_queue_command_queues_in_the_named_workspace(db):
    from simia_web.accounts.services import workspace_create
    from simia_web.jobs.models import Job

    research = workspace_create(slug="research")
    out = StringIO()
    call_command("queue", "synthesize", "--param", "domains=fresh", "--workspace", "research", stdout=out)
    assert Job.objects.get().workspace == research
    call_command("queue", "synthesize", "--param", "domains=other", stdout=out)
    assert Job.objects.latest("id").workspace.slug == "default"
    with pytest.raises(CommandError, match="No workspace 'nowhere'"):
        call_command("queue", "synthesize", "--param", "domains=x", "--workspace", "nowhere", stdout=out)
