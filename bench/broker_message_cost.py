"""What one broker message costs a worker, whatever its task does: the CPU a worker process spends per message of
Celery's built-in no-op task (`celery.accumulate`), received, run and acknowledged through the project's own Celery
configuration (Redis transport, thread pool, late acks as the unit tasks use them).

Against `bench/rollout_throughput.py`'s worker CPU per LLM call, it says how much of a unit's cost is the message
that carries it, and so what sending several units per message could save at most.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/12 python bench/broker_message_cost.py [--messages 4000]

Empties the Redis database named in CELERY_BROKER_URL.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/12")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import django
    import redis

    django.setup()
    from celery import current_app

    broker = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    broker.flushdb()
    worker = subprocess.Popen(
        [str(ROOT / ".venv/bin/celery"), "-A", "simia_web", "worker", "--pool", "threads", "--concurrency", "64"]
        + ["--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        current_app.send_task("celery.accumulate", args=(0,), ignore_result=True)
        while broker.llen("celery"):  # the worker is up and has taken its first message
            time.sleep(0.2)
        time.sleep(2)
        figures = []
        for _ in range(args.repeat):
            before = process_cpu_seconds(worker.pid)
            with current_app.producer_or_acquire() as producer:
                for i in range(args.messages):
                    current_app.send_task("celery.accumulate", args=(i,), ignore_result=True, producer=producer)
            while broker.llen("celery"):
                time.sleep(0.1)
            time.sleep(1)  # the last messages' acknowledgements
            figures.append((process_cpu_seconds(worker.pid) - before) / args.messages * 1000)
            print(f"{args.messages} messages: worker CPU {figures[-1]:.3f} ms per message")
        idle = process_cpu_seconds(worker.pid)
        time.sleep(3)
        print(f"idle worker: {(process_cpu_seconds(worker.pid) - idle) / 3 * 1000:.1f} ms of CPU per second")
        print(f"median: {sorted(figures)[len(figures) // 2]:.3f} ms of worker CPU per message")
    finally:
        worker.terminate()
        worker.wait()


if __name__ == "__main__":
    main()
