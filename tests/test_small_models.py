"""The pipeline against a small model on a server that enforces schemas (SmolLM2-135M on llama-cpp-python).

Every answer is whatever the request's schema and the tools' parameters allow and nothing more (see
tests/support/grammar_model.py): each stage must get its work through such answers, keep what validates
and record why the rest did not.
"""

import pytest

from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.curation.models import Trajectory
from simia_web.jobs.models import JobStatus
from simia_web.llm.models import LLMCall
from simia_web.synthesis.services import synthesis_queue

from .support.grammar_model import GrammarModel
from .support.personalities import LlamaCppPython


@pytest.mark.parametrize("seed", range(4))
def test_every_stage_gets_through_a_grammar_bound_model(eager, llm_stub, seed):
    llm_stub.personality = LlamaCppPython()
    llm_stub.responder = GrammarModel(seed)
    job = synthesis_queue(domains=["shop"], apis=3, tasks=2, rollouts=1, max_steps=6)
    job.refresh_from_db()

    domain = Domain.objects.get(name="shop")
    assert domain.apis.filter(valid=True).exists() and domain.state_problems == []
    assert domain.initial_state  # records the APIs work on
    valid_tasks = Task.objects.filter(domain=domain, status=TaskStatus.VALID).count()
    assert valid_tasks >= 2  # a task can name only the domain's APIs
    trajectories = list(Trajectory.objects.filter(job=job))
    assert len(trajectories) == valid_tasks
    for trajectory in trajectories:  # judged, or kept with the rule it broke
        assert trajectory.judge_passed is not None or trajectory.violations.exists(), trajectory.status
    assert job.status in {JobStatus.SUCCEEDED, JobStatus.FINISHED_WITH_ERRORS}, job.error
    # Each answer a grammar allows is read: the only failed call is the json_schema probe the server refuses.
    refused = LLMCall.objects.exclude(error_kind="")
    assert [call.error_kind for call in refused] == ["unsupported_mode"]
