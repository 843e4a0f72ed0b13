"""While an RL step waits for its simulator on SQLite (the embedded default), other writers go through.

Run in a process of its own by test_sqlite_writers.py, with DATABASE_URL naming a fresh SQLite file:
prints one JSON line saying which writes went through while the step was still waiting, and the step's result.
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from simia_web.accounts.services import user_create  # noqa: E402
from simia_web.curation.models import Trajectory  # noqa: E402
from simia_web.curation.services import review_decide  # noqa: E402
from simia_web.environments.services import env_create, env_step  # noqa: E402
from simia_web.jobs.models import JobStatus  # noqa: E402
from simia_web.llm.models import EndpointProfile  # noqa: E402
from simia_web.synthesis.services import rollout_queue, synthesis_queue  # noqa: E402
from tests.support.llm_stub import Reply, StubLLM  # noqa: E402
from tests.support.scripts import pipeline_responder, simulator_reply  # noqa: E402

# The simulator answers once the other writes are done (at most this long): the test holds on a busy machine.
SIMULATOR_WAIT_CAP = 90.0
CANCEL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "cancel_order", "arguments": '{"order_id": "W1", "reason": "wrong size"}'},
}


def main() -> None:
    call_command("migrate", verbosity=0)
    settings.CELERY_TASK_ALWAYS_EAGER = True  # a job runs its units in the call that queues it
    waiting = threading.Event()
    slow = threading.Event()
    writes_done = threading.Event()
    pipeline = pipeline_responder()

    def respond(request):
        if request.stage == "simulator" and slow.is_set():
            slow.clear()
            waiting.set()
            writes_done.wait(timeout=SIMULATOR_WAIT_CAP)
            return simulator_reply(request)
        if request.stage == "user_simulator":
            return Reply(content={"message": "Thanks.", "done": True})
        return pipeline(request)

    stub = StubLLM(responder=respond).start()
    EndpointProfile.objects.update(is_default=False)
    EndpointProfile.objects.create(name="stub", base_url=stub.url, model="stub", is_default=True, timeout_seconds=120)
    curator = user_create(username="curator", role="curator", password="correct-horse-9")
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    session = env_create(actor=curator, domain_name="shop")

    result = {}
    slow.set()
    step = threading.Thread(
        target=lambda: result.update(
            env_step(session_id=session.pk, actor=curator, payload={"message": {"tool_calls": [CANCEL]}})
        )
    )
    step.start()
    waiting.wait(timeout=30)
    went_through = {}

    job = rollout_queue(domain="shop", rollouts=1, tasks=1)
    job.refresh_from_db()
    went_through["job_unit"] = job.status == JobStatus.SUCCEEDED and step.is_alive()

    create_user = ["create_user", "ann", "--role", "annotator", "--password", "pw-ann-12345"]
    command = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *create_user],
        capture_output=True,
        text=True,
        timeout=60,
    )
    went_through["manage_py"] = command.returncode == 0 and step.is_alive()

    trajectory = Trajectory.objects.filter(job=job).get()
    review_decide(trajectory=trajectory, reviewer=curator, decision="accept", expected_version=trajectory.version)
    went_through["review"] = step.is_alive()
    writes_done.set()

    step.join(timeout=60)
    stub.stop()
    print(json.dumps({"went_through": went_through, "command": command.stderr[-2000:], "step": result}))


if __name__ == "__main__":
    main()
