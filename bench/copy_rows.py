"""Rows written straight into a model's table with PostgreSQL COPY, for loading benchmark data in minutes.

The columns a loader names come from its rows; every other column gets the model's default, prepared once, so a
column added to the model later is filled as the ORM would fill it. Generated columns are left to PostgreSQL.
"""

import contextlib
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil
from django.db import connection, transaction

# Definitions of indexes dropped for a load and not built again yet: an interrupted load leaves them for the next.
DEFERRED = "bench_deferred_index"
# What an index build may take (PostgreSQL's default of 64 MB makes a GIN build over millions of rows spill).
BUILD_MEMORY = "1GB"


class TableRows:
    """COPY into one model's table: each row gives `columns` (field attnames) in order; the rest take defaults."""

    def __init__(self, model, columns: tuple[str, ...]):
        fields = {field.attname: field for field in model._meta.concrete_fields}
        unknown = set(columns) - set(fields)
        if unknown:
            raise ValueError(f"{model.__name__} has no column(s) {', '.join(sorted(unknown))}")
        rest = [
            field
            for name, field in fields.items()
            if name not in columns and not field.generated and not field.primary_key
        ]
        self.table = model._meta.db_table
        self.columns = [fields[name].column for name in columns] + [field.column for field in rest]
        self.defaults = tuple(field.get_db_prep_save(field.get_default(), connection) for field in rest)

    def copy(self, cursor, rows: Iterable[tuple]) -> int:
        """Write the rows through `cursor` (a Django cursor on PostgreSQL); returns how many."""
        quote = connection.ops.quote_name
        sql = f"COPY {quote(self.table)} ({', '.join(quote(column) for column in self.columns)}) FROM STDIN"
        count, defaults = 0, self.defaults
        with cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row + defaults)
                count += 1
        return count


def identity_after_load(cursor, model) -> None:
    """Move the table's id sequence past the ids a load wrote itself."""
    table, pk = model._meta.db_table, model._meta.pk.column
    cursor.execute(
        f"SELECT setval(pg_get_serial_sequence(%s, %s), GREATEST((SELECT MAX({pk}) FROM {table}), 1))", [table, pk]
    )


def deferred_indexes_drop(model, *, using: str) -> None:
    """Drop the table's indexes of one access method (`gin`: costly row by row) while rows are written; their
    definitions wait in DEFERRED for deferred_indexes_build, which builds each in one pass."""
    table, quote = model._meta.db_table, connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {DEFERRED} (name text PRIMARY KEY, definition text NOT NULL)")
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s "
            "AND indexdef LIKE %s",
            [table, f"% USING {using} %"],
        )
        for name, definition in cursor.fetchall():
            cursor.execute(f"INSERT INTO {DEFERRED} VALUES (%s, %s) ON CONFLICT DO NOTHING", [name, definition])
            cursor.execute(f"DROP INDEX {quote(name)}")


def deferred_indexes_build() -> list[str]:
    """Build every index a load deferred (its own or an interrupted one's); returns their names."""
    built = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [DEFERRED])
        if not cursor.fetchone()[0]:
            return built
        cursor.execute(f"SELECT name, definition FROM {DEFERRED} ORDER BY name")
        for name, definition in cursor.fetchall():
            with transaction.atomic():
                cursor.execute(f"SET LOCAL maintenance_work_mem = '{BUILD_MEMORY}'")
                cursor.execute(definition)
                cursor.execute(f"DELETE FROM {DEFERRED} WHERE name = %s", [name])
            built.append(name)
    return built


@dataclass
class PhaseTime:
    seconds: float
    python_cpu: float  # this process
    database_cpu: float | None  # its PostgreSQL backend (None when the server is on another machine)


class PhaseClock:
    """Wall time and CPU (this process's and its PostgreSQL backend's) of each phase of a load, printed as it
    ends: CPU seconds say what a phase costs whatever else the machine is doing."""

    def __init__(self):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        try:
            self.backend = psutil.Process(pid)
            self.backend.cpu_times()
        except psutil.Error:
            self.backend = None
        self.phases: dict[str, PhaseTime] = {}
        self.started = self.mark = self._now()

    def _now(self) -> tuple[float, float, float | None]:
        backend = sum(self.backend.cpu_times()[:2]) if self.backend else None
        return time.perf_counter(), time.process_time(), backend

    def elapsed(self) -> float:
        return time.perf_counter() - self.started[0]

    def lap(self, name: str) -> PhaseTime:
        now = self._now()
        database = None if now[2] is None else now[2] - self.mark[2]
        phase = self.phases[name] = PhaseTime(now[0] - self.mark[0], now[1] - self.mark[1], database)
        self.mark = now
        cpu = f"{phase.python_cpu:.0f} s Python" + ("" if database is None else f", {database:.0f} s PostgreSQL")
        print(f"{name}: {phase.seconds:.0f} s ({cpu} CPU)", file=sys.stderr)
        return phase


class PeakMemory:
    """The largest resident set of any one of a worker's processes, sampled every `every` seconds while the block
    runs."""

    def __init__(self, pid: int, every: float = 0.1):
        self.root, self.peak, self.running, self.every = psutil.Process(pid), 0, False, every

    def _sample(self):
        while self.running:
            for process in [self.root, *self.root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    self.peak = max(self.peak, process.memory_info().rss)
            time.sleep(self.every)

    def __enter__(self):
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
