"""A small shop domain and token clients for the RL environment tests."""

import pytest
from rest_framework.test import APIClient

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Api, Domain, Task, TaskStatus
from tests.support.llm_stub import Reply, Request
from tests.support.scripts import JUDGE_PASS, SHOP, simulator_reply


@pytest.fixture
def shop(db):
    spec = SHOP
    domain = Domain.objects.create(
        name="shop",
        policy="Only pending orders can be cancelled.",
        state_schema=spec["state_schema"],
        initial_state=spec["initial_state"],
    )
    for api in spec["apis"][:2]:
        Api.objects.create(domain=domain, **api)
    Api.objects.create(domain=domain, name="BadName", parameters={}, valid=False)
    tasks = [
        Task.objects.create(
            domain=domain, instruction=f"Cancel my order W1, reason {i}.", expected_outcome="W1 cancelled"
        )
        for i in range(3)
    ]
    Task.objects.create(domain=domain, instruction="Teleport my parcel.", status=TaskStatus.REJECTED)
    return {"domain": domain, "tasks": tasks}


class Script:
    """Scripted answers of the agent-independent stages; tests change the fields they care about."""

    def __init__(self):
        self.user_turns: list[str] = []  # messages the simulated user sends before saying it is done
        self.judge = JUDGE_PASS
        self.agent = None  # set to answer requests without a stage (a policy server in client tests)

    def __call__(self, request: Request) -> Reply:
        if request.stage == "simulator":
            return simulator_reply(request)
        if request.stage == "user_simulator":
            if self.user_turns:
                return Reply(content={"message": self.user_turns.pop(0), "done": False})
            return Reply(content={"message": "Thanks, that's all.", "done": True})
        if request.stage == "judge":
            return Reply(content=self.judge)
        if not request.stage and self.agent is not None:
            return self.agent(request)
        return Reply(status=500, error_message=f"no script for stage {request.stage!r}")


@pytest.fixture
def script(llm_stub):
    llm_stub.responder = Script()
    return llm_stub.responder


@pytest.fixture
def api_for(users):
    def make(role: str | None = None, token: str | None = None) -> APIClient:
        client = APIClient()
        if role is not None:
            token = user_token(user=users[role])
        if token is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client

    return make


@pytest.fixture
def curator(api_for):
    return api_for("curator")


CANCEL = {
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "cancel_order", "arguments": '{"order_id": "W1", "reason": "wrong size"}'},
        }
    ],
}


def tool_call(name: str, arguments, call_id: str = "call_x") -> dict:
    return {"tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}
