"""Export throughput and memory against PostgreSQL.

Creates N accepted trajectories (bulk_create) in a domain of their own, exports them with the
same service the snapshot jobs use, and compares with dumping the same rows' JSON through
PostgreSQL COPY. The export runs in a fresh child process so its peak RSS is its own.

    DATABASE_URL=postgres://... python bench/export_throughput.py [--rows 100000] [--format openai]

The rows are deleted at the end unless --keep is given.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

DOMAIN = "bench-export"
RSS_LIMIT_MB = 300


def _setup():
    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("This benchmark needs PostgreSQL: set DATABASE_URL=postgres://...")


def _conversation(i: int) -> tuple[list, list]:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_order",
                "description": "Look up an order by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string"}},
                    "required": ["order_id"],
                },
            },
        }
    ]
    messages = [
        {"role": "system", "content": "You are a helpful shop assistant. Follow the policy."},
        {"role": "user", "content": f"Hi, where is my order W{i}? I ordered it last week."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": f'{{"order_id": "W{i}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f'{{"order_id": "W{i}", "status": "shipped"}}'},
        {"role": "assistant", "content": f"Your order W{i} has shipped and should arrive in two days."},
    ]
    return messages, tools


def rows_create(n: int) -> int:
    from simia_web.catalog.models import Domain
    from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus

    domain, _ = Domain.objects.get_or_create(name=DOMAIN, defaults={"description": "export benchmark rows"})
    Trajectory.objects.filter(domain=domain).delete()
    batch = []
    for i in range(n):
        messages, tools = _conversation(i)
        batch.append(
            Trajectory(
                kind=TrajectoryKind.DEMO,
                status=TrajectoryStatus.ACCEPTED,
                domain=domain,
                messages=messages,
                tools=tools,
                judge_passed=True,
                judge_score=0.9,
                termination_reason="final_answer",
            )
        )
        if len(batch) == 5000:
            Trajectory.objects.bulk_create(batch)
            batch = []
    Trajectory.objects.bulk_create(batch)
    return domain.pk


def rows_delete() -> None:
    from simia_web.catalog.models import Domain
    from simia_web.curation.models import Trajectory

    Trajectory.objects.filter(domain__name=DOMAIN).delete()
    Domain.objects.filter(name=DOMAIN).delete()


def export_child(fmt: str, output: str) -> dict:
    """Runs in the child process: the export alone, with its own peak RSS."""
    from simia_web.exports.selectors import export_filters_clean
    from simia_web.exports.services import export_write

    started = time.perf_counter()
    result = export_write(format=fmt, filters=export_filters_clean({"domain": DOMAIN}), path=Path(output))
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rows": result.stats.count, "seconds": seconds, "bytes": result.bytes, "peak_rss_mb": peak_kb / 1024}


def copy_dump(domain_id: int, output: Path) -> dict:
    """The floor: the same rows' JSON straight out of PostgreSQL with COPY, no conversion or checks."""
    from django.db import connection

    connection.ensure_connection()
    sql = (
        "COPY (SELECT json_build_object('messages', messages, 'tools', tools) FROM curation_trajectory "
        f"WHERE domain_id = {int(domain_id)} AND status = 'accepted' ORDER BY id) TO STDOUT"
    )
    started = time.perf_counter()
    size = rows = 0
    with connection.connection.cursor() as cursor, cursor.copy(sql) as copy, open(output, "wb") as handle:
        for data in copy:
            handle.write(data)
            size += len(data)
            rows += bytes(data).count(b"\n")
    return {"rows": rows, "seconds": time.perf_counter() - started, "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--format", default="openai", choices=["openai", "sharegpt", "tau2"])
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark rows afterwards.")
    parser.add_argument("--reuse", action="store_true", help="Export rows left by an earlier --keep run.")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: run the export and print JSON
    args = parser.parse_args()
    _setup()
    if args.child:
        print(json.dumps(export_child(args.format, args.child)))
        return

    from simia_web.catalog.models import Domain

    if args.reuse and Domain.objects.filter(name=DOMAIN).exists():
        domain_id = Domain.objects.get(name=DOMAIN).pk
    else:
        started = time.perf_counter()
        domain_id = rows_create(args.rows)
        print(f"created {args.rows} trajectories in {time.perf_counter() - started:.1f}s")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            child = subprocess.run(
                [sys.executable, __file__, "--format", args.format, "--child", str(Path(tmp) / "export.out")],
                check=True,
                capture_output=True,
                text=True,
            )
            export = json.loads(child.stdout.strip().splitlines()[-1])
            copy = copy_dump(domain_id, Path(tmp) / "copy.out")
    finally:
        if not args.keep:
            rows_delete()
    export_rate = export["rows"] / export["seconds"]
    copy_rate = copy["rows"] / copy["seconds"]
    print(
        f"export {args.format}: {export['rows']} rows in {export['seconds']:.2f}s = {export_rate:,.0f} rows/s, "
        f"{export['bytes'] / 1e6:.1f} MB, peak RSS {export['peak_rss_mb']:.0f} MB "
        f"({'under' if export['peak_rss_mb'] < RSS_LIMIT_MB else 'OVER'} {RSS_LIMIT_MB} MB)"
    )
    print(
        f"COPY json:   {copy['rows']} rows in {copy['seconds']:.2f}s = {copy_rate:,.0f} rows/s, "
        f"{copy['bytes'] / 1e6:.1f} MB"
    )
    print(
        f"ratio: the export takes {export['seconds'] / copy['seconds']:.1f}x the time of COPY "
        f"({export_rate / copy_rate:.2f} of its rows/s)"
    )


if __name__ == "__main__":
    main()
