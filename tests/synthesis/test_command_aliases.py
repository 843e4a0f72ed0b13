"""The old commands `synthesize`, `rollout` and `amplify`: aliases of `manage.py queue KIND` that say so on stderr,
in one line, and queue what the queue command queues for the same request."""

import shlex
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from simia_web.accounts.services import workspace_create
from simia_web.catalog.models import Domain
from simia_web.curation.models import Trajectory
from simia_web.jobs.models import Job, JobStatus

OLD_AND_NEW = [
    (
        ["synthesize", "--domain", "shop", "--domain", "bank", "--apis", "3", "--tasks", "2", "--rollouts", "4"]
        + ["--max-steps", "5", "--max-errors", "2", "--user-turns", "1", "--description", "A shop"],
        ["synthesize", "domains=shop", "domains=bank", "description=A shop", "apis=3", "tasks=2", "rollouts=4"]
        + ["max_steps=5", "max_errors=2", "user_turns=1"],
    ),
    (
        ["rollout", "--domain", "shop", "--tasks", "10", "--rollouts", "4", "--max-steps", "7"],
        ["rollout", "domain=shop", "tasks=10", "rollouts=4", "max_steps=7"],
    ),
    (
        ["amplify", "--count", "20", "--domain", "shop", "--seed", "3", "--seed", "5", "--strategy", "random"]
        + ["--rng-seed", "9", "--min-messages", "4", "--max-messages", "30"],
        ["amplify", "count=20", "rng_seed=9", "min_messages=4", "max_messages=30", "domain=shop", "seed_ids=3"]
        + ["seed_ids=5", "strategy=random"],
    ),
    # A parameter the old command never had goes through as the queue command takes it.
    (
        ["rollout", "--domain", "shop", "--param", "environment=reference"],
        ["rollout", "domain=shop", "environment=reference"],
    ),
]


class Queued(list):
    """The (kind, params) of each job queued, and the workspace each was queued in."""

    def __init__(self):
        super().__init__()
        self.workspaces: list[str | None] = []


@pytest.fixture
def queued(monkeypatch, db):
    """What the queue command hands to job_queue, without a job being written (the database is there for the
    workspace the command names and the job's default one)."""
    calls = Queued()

    def job_queue(*, kind, params, workspace=None):
        calls.append((kind, params))
        calls.workspaces.append(workspace.slug if workspace is not None else None)
        return Job(pk=len(calls), kind=kind)

    monkeypatch.setattr("simia_web.jobs.management.commands.queue.job_queue", job_queue)
    return calls


@pytest.mark.parametrize(("old", "new"), OLD_AND_NEW, ids=lambda args: args[0] if "--param" not in args else "param")
def test_an_alias_says_which_queue_command_it_runs_and_queues_what_that_queues(queued, old, new):
    out, err = StringIO(), StringIO()
    call_command(*old, stdout=out, stderr=err)
    kind, *pairs = new
    assert out.getvalue() == f"Queued job 1 ({kind}). Follow it at /jobs/1/ or with --wait.\n"
    said = err.getvalue().splitlines()
    assert len(said) == 1 and said[0].startswith(f"manage.py {old[0]} is now manage.py queue {kind}; running: ")
    # The command it names, run as written, and the same request written by hand, queue the same job.
    call_command(*shlex.split(said[0].split("running: manage.py ", 1)[1]), stdout=StringIO())
    call_command("queue", kind, *(arg for pair in pairs for arg in ("--param", pair)), stdout=StringIO())
    assert queued[0] == queued[1] == queued[2] and queued[0][0] == kind


def test_the_policy_file_is_read_as_the_queue_command_reads_at_path(queued, tmp_path):
    policy = tmp_path / "policy.md"
    policy.write_text("Refunds need a receipt.")
    call_command("synthesize", "--domain", "shop", "--policy-file", str(policy), stdout=StringIO(), stderr=StringIO())
    assert queued == [("synthesize", {"domains": ["shop"], "policy": "Refunds need a receipt."})]
    with pytest.raises(CommandError, match="policy: cannot read"):
        call_command("synthesize", "--domain", "shop", "--policy-file", str(tmp_path / "none.md"), stderr=StringIO())


def test_aliases_refuse_what_the_kind_refuses(db):
    with pytest.raises(CommandError, match="rollouts"):
        call_command("synthesize", "--domain", "shop", "--rollouts", "0", stderr=StringIO())
    with pytest.raises(CommandError, match="count"):
        call_command("amplify", "--count", "0", stderr=StringIO())
    assert not Job.objects.exists()


def test_the_aliases_run_jobs_end_to_end(eager, llm_stub):
    err = StringIO()
    call_command(
        "synthesize", "--domain", "shop", "--apis", "3", "--tasks", "1", "--wait", stdout=StringIO(), stderr=err
    )
    call_command("rollout", "--domain", "shop", "--rollouts", "2", "--wait", stdout=StringIO(), stderr=err)
    synthesis, rollout = Job.objects.order_by("id")
    assert (synthesis.kind, rollout.kind) == ("synthesize", "rollout")
    assert synthesis.status == rollout.status == JobStatus.SUCCEEDED
    assert Domain.objects.filter(name="shop").exists()
    assert Trajectory.objects.filter(job=rollout).count() == 2
    assert [line.split(";")[0] for line in err.getvalue().splitlines() if line.startswith("manage.py")] == [
        "manage.py synthesize is now manage.py queue synthesize",
        "manage.py rollout is now manage.py queue rollout",
    ]


def test_an_alias_passes_the_workspace_on(queued):
    workspace_create(slug="team-b")
    err = StringIO()
    call_command("rollout", "--domain", "shop", "--workspace", "team-b", stdout=StringIO(), stderr=err)
    assert err.getvalue().rstrip().endswith("manage.py queue rollout --param domain=shop --workspace team-b")
    assert queued == [("rollout", {"domain": "shop"})] and queued.workspaces == ["team-b"]
