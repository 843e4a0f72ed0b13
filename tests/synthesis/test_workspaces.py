"""Synthesis jobs work in their workspace: the domains and seeds their parameters name are looked up there (another
workspace's is refused as a missing one), and what they make belongs to it."""

import pytest

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import workspace_create
from simia_web.catalog.models import Domain, Seed, Task, TaskStatus
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Trajectory
from simia_web.synthesis.job_kinds.amplify import AmplifyForm
from simia_web.synthesis.job_kinds.rollout import RolloutForm, RolloutJobSerializer
from simia_web.synthesis.services import amplification_queue, rollout_queue, synthesis_queue
from tests.support.scripts import SHOP


@pytest.fixture
def team_b(db):
    return workspace_create(slug="team-b", name="Team B")


@pytest.fixture
def shop_of_a(db):
    """Team A's (the `default` workspace's) domain, with a valid task and a usable seed."""
    domain = Domain.objects.create(
        name="shop", state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"], policy="Be kind."
    )
    Task.objects.create(domain=domain, instruction="Cancel order W1.", status=TaskStatus.VALID)
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    seed = Seed.objects.create(domain=domain, source_format="openai", messages=messages, content_hash="x")
    return domain, seed


def _refusal(call) -> dict:
    with pytest.raises(ValidationFailed) as refused:
        call()
    return refused.value.errors


def test_a_job_of_workspace_b_refuses_a_domain_of_a_as_a_missing_one(shop_of_a, team_b):
    _, seed = shop_of_a
    rollout = _refusal(lambda: rollout_queue(domain="shop", rollouts=1, workspace=team_b))
    missing = _refusal(lambda: rollout_queue(domain="nowhere", rollouts=1, workspace=team_b))
    assert rollout == {"domain": ["no domain named 'shop'"]}
    assert missing == {"domain": ["no domain named 'nowhere'"]}
    assert _refusal(lambda: amplification_queue(count=1, domain="shop", workspace=team_b)) == rollout
    assert _refusal(lambda: amplification_queue(count=1, seed_ids=[seed.pk], workspace=team_b)) == {
        "seed": [f"no seed with id {seed.pk}"]
    }
    assert _refusal(lambda: amplification_queue(count=1, workspace=team_b))["seed"]  # no usable seed of its own
    # The serializer reads the workspace from its context (jobs.services.job_queue puts it there).
    serializer = RolloutJobSerializer(data={"domain": "shop"}, context={"workspace": team_b})
    assert serializer.is_valid()
    assert serializer.workspace_id == team_b.pk
    # Without one it reads the `default` workspace's, where shop is.
    assert RolloutJobSerializer(data={"domain": "shop"}).workspace_id == Workspace.objects.get(slug="default").pk


def test_a_synthesis_job_makes_its_domains_in_its_workspace(eager, llm_stub, shop_of_a, team_b):
    taken = _refusal(lambda: synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1, workspace=team_b))
    assert taken == {"domains": ["the name 'shop' is taken: choose another name"]}
    job = synthesis_queue(domains=["bank"], apis=3, tasks=1, rollouts=1, workspace=team_b)
    assert job.workspace_id == team_b.pk
    bank = Domain.objects.get(name="bank")
    assert bank.workspace_id == team_b.pk
    assert Task.objects.filter(job=job).exists() and set(
        Task.objects.filter(job=job).values_list("domain", flat=True)
    ) == {bank.pk}
    assert Trajectory.objects.filter(job=job).exists()
    assert set(Trajectory.objects.filter(job=job).values_list("domain", flat=True)) == {bank.pk}


def test_queue_forms_offer_the_workspaces_domains(shop_of_a, team_b):
    Domain.objects.create(name="bank", workspace=team_b)
    for form_class in (RolloutForm, AmplifyForm):
        names = [name for name, _ in form_class(workspace=team_b).fields["domain"].choices if name]
        assert names == ["bank"]
        assert "shop" in [name for name, _ in form_class().fields["domain"].choices if name]
        assert not form_class({"domain": "shop"}, workspace=team_b).is_valid()
