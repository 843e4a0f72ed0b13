import threading

import pytest

from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from tests.support.llm_stub import Reply

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.fixture
def stub(llm_stub, settings):
    """The loopback endpoint answering {"answer": 42} to everything, three attempts per call."""
    settings.SIMIA_LLM_MAX_ATTEMPTS = 3
    llm_stub.responder = lambda request: Reply(content={"answer": 42})
    return llm_stub


@pytest.fixture
def sleeps(monkeypatch):
    """Record the waits the client asks for between attempts, without waiting them out."""
    from simia_web.llm import client as llm_client

    asked = []
    real_sleep = llm_client.time.sleep
    caller = threading.current_thread()

    def fake_sleep(seconds):
        if threading.current_thread() is not caller:  # the stub's own delays stay real
            return real_sleep(seconds)
        asked.append(seconds)
        real_sleep(min(seconds, 0.01))

    monkeypatch.setattr(llm_client.time, "sleep", fake_sleep)
    return asked


def ask(stage=Stage.JUDGE, **kwargs):
    """One structured call for {"answer": int} on the stage's profile."""
    return client_for_stage(stage, job_id=kwargs.pop("job_id", None)).structured(
        messages=kwargs.pop("messages", [{"role": "user", "content": "What is six times seven?"}]),
        schema=ANSWER_SCHEMA,
        schema_name="answer",
        **kwargs,
    )
