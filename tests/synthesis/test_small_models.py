"""The pipeline against a small model on a server that enforces schemas (SmolLM2-135M on llama-cpp-python).

Every answer is whatever the request's schema and the tools' parameters allow and nothing more (see
tests/support/grammar_model.py): each stage must get its work through such answers, keep what validates
and record why the rest did not.
"""

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from simia_web.catalog.importers import seeds_import
from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.curation.models import RuleViolation, Trajectory
from simia_web.formats.conversation import tool_call
from simia_web.formats.sharegpt import canonical_to_sharegpt
from simia_web.jobs.models import JobStatus
from simia_web.llm.models import LLMCall
from simia_web.simulation import judge, simulator, user_simulator
from simia_web.synthesis.amplify_answer import amplified_schema
from simia_web.synthesis.generation import api_schema, task_schema
from simia_web.synthesis.services import amplification_queue, synthesis_queue
from tests.support.grammar_model import GrammarModel
from tests.support.personalities import GRAMMAR_MAX_STRING, LlamaCppPython, longest_string


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


def test_amplification_gets_judged_trajectories_from_a_grammar_bound_model(eager, llm_stub):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_order_details",
                "description": "Get the status and details of an order.",
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string", "description": "The order id, such as '#W0000000'."}},
                    "required": ["order_id"],
                },
            },
        }
    ]
    seed = [
        {"role": "system", "content": "You are a retail support agent."},
        {"role": "user", "content": "Where is my order #W2378156?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1", "get_order_details", {"order_id": "#W1"})]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "delivered"}'},
        {"role": "assistant", "content": "Order #W2378156 was delivered."},
    ]
    record = canonical_to_sharegpt(seed, tools)
    seeds_import(source=SimpleUploadedFile("seeds.json", orjson.dumps([record])), format="sharegpt", domain="retail")
    llm_stub.personality = LlamaCppPython()
    llm_stub.responder = GrammarModel(7)
    job = amplification_queue(count=6, domain="retail", min_messages=3)
    job.refresh_from_db()

    trajectories = list(Trajectory.objects.filter(job=job))
    assert len(trajectories) == 6
    # Turns unroll into well-formed conversations whose calls match their tools: only the judge decides.
    assert not RuleViolation.objects.filter(trajectory__job=job, fixed=False).exists()
    assert all(t.judge_passed is not None for t in trajectories)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert [call.error_kind for call in LLMCall.objects.exclude(error_kind="")] == ["unsupported_mode"]


def test_every_request_schema_fits_llama_cpp_grammar_limits():
    tools = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}]
    schemas = [
        api_schema(3),
        task_schema(2, ["get_order"]),
        simulator.answer_schema({"orders": {}, "users": {}}),
        simulator.answer_schema({"odd key/": {}}),
        judge.SCHEMA,
        user_simulator.SCHEMA,
        amplified_schema(tools),
    ]
    assert all(0 < longest_string(schema) <= GRAMMAR_MAX_STRING for schema in schemas)
