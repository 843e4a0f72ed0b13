"""Time to heal after each fault, on a cluster of its own (a PostgreSQL and a Redis on ports 16300-16399,
never the shared ones; see tests/faults/cluster.py): the Redis broker killed without persistence and
started again, PostgreSQL stopped (fast shutdown) and started again, a worker killed with SIGKILL,
each mid-job, and nobody running a command by hand.

    python bench/fault_healing.py [--tasks 60] [--answers-before-fault 200] [--heartbeat 5] [--repeat 3]

For each fault, seconds from the moment the server was started again (or the worker died): when every
lost unit had been sent again, when a unit next finished, when the job ended; the median of --repeat
runs. The jobs are rollouts of --tasks x 2 units against a scripted server answering in --latency.
With production's heartbeat (5 s, leases of 15 s) a lost unit is sent again once its lease, and the
time since its message was sent, are over 15 s; the fault suite in `make test` runs with 2 s beats.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=60, help="Tasks of the job (2 rollout units each).")
    parser.add_argument("--heartbeat", type=float, default=5.0, help="SIMIA_UNIT_HEARTBEAT_SECONDS of the workers.")
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds the scripted server takes per answer.")
    parser.add_argument(
        "--answers-before-fault", type=int, default=200, help="LLM answers the job gets before the fault strikes."
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--faults", default="broker,database,worker", help="Which faults, comma-separated.")
    args = parser.parse_args()

    import django

    django.setup()
    from tests.faults import scenarios
    from tests.faults.cluster import FaultRun, Servers, servers_missing

    if reason := servers_missing():
        sys.exit(reason)
    root = Path(tempfile.mkdtemp(prefix="simia-faults-"))
    root.chmod(0o755)
    servers = Servers(root, tasks=args.tasks, heartbeat=args.heartbeat).start()
    try:
        faults = {
            "broker": ("broker restart", scenarios.broker_restart),
            "database": ("database restart", scenarios.database_restart),
            "worker": ("worker killed", scenarios.worker_kill),
        }
        for name, scenario in (faults[fault] for fault in args.faults.split(",")):
            runs = []
            for _ in range(args.repeat):
                run = FaultRun(servers, latency=args.latency, answers_before_fault=args.answers_before_fault)
                try:
                    figures = scenario(run)
                finally:
                    run.close()
                runs.append({k: v for k, v in figures.items() if isinstance(v, int | float)})
                print(f"  {name}: {scenarios.figures_line(runs[-1])}", flush=True)
            medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            print(f"{name} (median of {len(runs)}): {scenarios.figures_line(medians)}", flush=True)
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
