"""Where a snapshot part's time goes, stage by stage, per 100k OpenAI records.

Reads the rows bench/export_throughput.py left (`--keep`) the way a part reads them (exports.records.record_rows,
with each conversation as the stored JSON text), then runs each of the part loop's stages over all of them in turn:
the gate (exports.records.gated_openai_record: decoded, checked and encoded by formats.openai.openai_record_from_text),
the dataset card's facts, the manifest line and the write. Each stage is timed alone, wall clock and this process's
CPU; the read's wall time also holds PostgreSQL's work. The rows read are set aside from the cyclic collector, since
a part holds a chunk of them at a time, not all.

    DATABASE_URL=postgres://... python bench/export_part_stages.py [--records 100000]
"""

import argparse
import gc
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


class Stages:
    def __init__(self):
        self.rows: list[tuple[str, float, float]] = []

    def timed(self, name: str, work):
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        self.rows.append((name, time.perf_counter() - wall, time.process_time() - cpu))
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import transaction
    from export_throughput import DOMAIN

    from simia_web.curation.models import Trajectory
    from simia_web.exports.card_facts import DatasetFacts
    from simia_web.exports.files import HashingWriter
    from simia_web.exports.records import ExportStats, Manifest, gated_openai_record, record_rows

    bench_rows = Trajectory.objects.filter(domain__name=DOMAIN, status="accepted")
    last = bench_rows.order_by("pk").values_list("pk", flat=True)[args.records - 1 : args.records].first()
    if last is None:
        sys.exit(f"Fewer than {args.records} rows of {DOMAIN}: run bench/export_throughput.py --keep first.")
    stages, stats = Stages(), ExportStats()
    with transaction.atomic():  # the server-side cursor's
        rows = stages.timed(
            "read the rows, decisions and verdicts",
            lambda: list(record_rows(bench_rows.filter(pk__lte=last), conversation_text=True)),
        )
    gc.freeze()
    gated = stages.timed(
        "the gate (decode, check, encode)", lambda: [gated_openai_record(row, stats, "openai") for row in rows]
    )
    assert stats.refused_count == 0, stats.refusals[:3]
    facts = DatasetFacts()
    stages.timed(
        "the dataset card's facts",
        lambda: [facts.add(row, record.measure) for row, record in zip(rows, gated, strict=True)],
    )
    manifest = Manifest(HashingWriter(io.BytesIO()))
    stages.timed(
        "the manifest line", lambda: [manifest.add(row, record.line) for row, record in zip(rows, gated, strict=True)]
    )
    with open(os.devnull, "wb") as sink:
        stages.timed("writing the line", lambda: [sink.write(record.line + b"\n") for record in gated])
    per = 100_000 / len(rows)
    print(f"{len(rows)} records, load average {os.getloadavg()[0]:.1f}")
    print("| stage of a part (OpenAI) | wall per 100k | this process's CPU per 100k |\n| --- | ---: | ---: |")
    for name, wall, cpu in stages.rows:
        print(f"| {name} | {wall * per:.2f} s | {cpu * per:.2f} s |")


if __name__ == "__main__":
    main()
