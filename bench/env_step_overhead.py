"""Step overhead of the RL environment, excluding LLM time.

Runs whole episodes through the real HTTP stack (Django test client: middleware, token auth, DRF,
services, row lock, trajectory write) against the scripted zero-latency LLM server, and reports per
step: wall time minus the latency_ms of the LLM calls that step made (from its LLMCall rows).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia python bench/env_step_overhead.py --episodes 50

A throwaway test database is created and dropped; the configured database is never touched.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment, teardown_test_environment  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from simia_web.accounts.services import user_create, user_token  # noqa: E402
from simia_web.catalog.models import Api, Domain, Task  # noqa: E402
from simia_web.llm.models import EndpointProfile, LLMCall  # noqa: E402
from tests.support.llm_stub import Reply, StubLLM  # noqa: E402
from tests.support.scripts import APIS, JUDGE_PASS, simulator_reply  # noqa: E402


def responder(request):
    if request.stage == "simulator":
        return simulator_reply(request)
    if request.stage == "user_simulator":
        return Reply(content={"message": "Thanks, that's all.", "done": True})
    if request.stage == "judge":
        return Reply(content=JUDGE_PASS)
    return Reply(status=500, error_message=f"no script for stage {request.stage!r}")


def fixtures(stub: StubLLM) -> str:
    EndpointProfile.objects.update(is_default=False)
    EndpointProfile.objects.create(
        name="bench-stub", base_url=stub.url, model="stub", is_default=True, timeout_seconds=5
    )
    domain = Domain.objects.create(
        name="bench-shop", state_schema=APIS["state_schema"], initial_state=APIS["initial_state"], policy="Be nice."
    )
    for api in APIS["apis"][:2]:
        Api.objects.create(domain=domain, **api)
    Task.objects.create(domain=domain, instruction="Cancel my order W1.", expected_outcome="W1 cancelled")
    user = user_create(username="bench", role="curator", password="bench-password-1")
    return user_token(user=user)


def call_message(n: int) -> dict:
    arguments = '{"order_id": "W1", "reason": "wrong size"}'
    return {
        "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": "cancel_order", "arguments": arguments}}
        ]
    }


def timed_step(client: APIClient, env_id: str, message: dict) -> tuple[float, float]:
    """(wall ms, LLM ms) of one step."""
    before = LLMCall.objects.order_by("-id").values_list("id", flat=True).first() or 0
    started = time.perf_counter()
    response = client.post(f"/api/v1/envs/{env_id}/step", {"message": message}, format="json")
    wall = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.content
    llm = sum(LLMCall.objects.filter(id__gt=before).values_list("latency_ms", flat=True))
    return wall, float(llm)


def report(label: str, samples: list[float]) -> None:
    if not samples:
        return
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    print(
        f"{label:<22} n={len(samples):<5} mean={statistics.fmean(samples):7.2f} ms  "
        f"p50={statistics.median(samples):7.2f} ms  p95={p95:7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--tool-steps", type=int, default=3, help="tool-call steps per episode before the answer")
    args = parser.parse_args()

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    stub = StubLLM(responder=responder).start()
    try:
        token = fixtures(stub)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        task = Task.objects.get(domain__name="bench-shop")
        overhead = {"tool call step": [], "final step (judge)": [], "reset": []}
        llm_total = 0.0
        for episode in range(args.episodes):
            started = time.perf_counter()
            response = client.post("/api/v1/envs/", {"task": task.pk, "max_steps": 50}, format="json")
            overhead["reset"].append((time.perf_counter() - started) * 1000)
            env_id = response.json()["id"]
            for n in range(args.tool_steps):
                wall, llm = timed_step(client, env_id, call_message(episode * 100 + n))
                overhead["tool call step"].append(wall - llm)
                llm_total += llm
            wall, llm = timed_step(client, env_id, {"content": "Your order W1 is cancelled."})
            overhead["final step (judge)"].append(wall - llm)
            llm_total += llm
        print(f"database: {connection.vendor}; {args.episodes} episodes; LLM time excluded ({llm_total:.0f} ms total)")
        for label, samples in overhead.items():
            report(label, samples)
        report("all steps", overhead["tool call step"] + overhead["final step (judge)"])
    finally:
        stub.stop()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


if __name__ == "__main__":
    main()
