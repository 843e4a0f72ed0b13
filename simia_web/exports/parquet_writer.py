"""The Parquet export (Hugging Face datasets): sharded files of nested message and tool columns.

A module of its own so that pyarrow is imported only by the process that writes Parquet (exports.writers loads it
on use), not by every web process that imports the export formats.
"""

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from simia_web.catalog.models import Domain
from simia_web.formats.parquet import SCHEMA, parquet_row

from .files import HashingWriter, Shards
from .records import ExportStats, Manifest, gated_openai_record, json_line, record_rows

ROW_GROUP_ROWS = 1000
ROW_GROUP_BYTES = 8 * 1024 * 1024  # of the rows' JSON: a row group of long conversations is cut sooner


class _ShardWriter:
    """Rows into the current shard, a row group at a time; a new shard once one holds `max_rows` rows or has
    passed `max_bytes` (checked at row-group boundaries, so a shard ends within one row group of the limit)."""

    def __init__(self, shards: Shards):
        self.shards = shards
        self.buffer: list[dict] = []
        self.buffered_bytes = 0
        self.writer: Any = None  # a pyarrow ParquetWriter while a shard is open
        self.stream: HashingWriter | None = None
        self.rows_in_shard = 0

    def add(self, row: dict, size: int) -> None:
        if self.writer is None:
            self._open()
        self.buffer.append(row)
        self.buffered_bytes += size
        self.rows_in_shard += 1
        if len(self.buffer) >= ROW_GROUP_ROWS or self.buffered_bytes >= ROW_GROUP_BYTES:
            self._flush()
        if self.rows_in_shard >= self.shards.max_rows or (
            not self.buffer and self.stream is not None and self.stream.bytes >= self.shards.max_bytes
        ):
            self._close()

    def _open(self) -> None:
        self.stream = self.shards.open()
        self.writer = pq.ParquetWriter(pa.PythonFile(self.stream, mode="w"), SCHEMA, compression="zstd")
        self.rows_in_shard = 0

    def _flush(self) -> None:
        if self.buffer:
            self.writer.write_table(pa.Table.from_pylist(self.buffer, schema=SCHEMA))
        self.buffer, self.buffered_bytes = [], 0

    def _close(self) -> None:
        self._flush()
        self.writer.close()
        self.shards.close()
        self.writer = None

    def close(self) -> None:
        """Close the last shard; an export of no records still has one shard, with the columns and no rows."""
        if self.writer is None and not self.shards.written:
            self._open()
        if self.writer is not None:
            self._close()


def write_parquet_shards(shards: Shards, queryset, stats: ExportStats, label: str, manifest: Manifest) -> None:
    domain_names = dict(Domain.objects.values_list("id", "name"))
    writer = _ShardWriter(shards)
    for row in record_rows(queryset, conversation_text=True):
        gated = gated_openai_record(row, stats, "parquet")
        if gated is None:
            continue
        decision, verdict = row["decision"] or {}, row["verdict"] or {}
        about = {
            **row,
            "trajectory_id": row["id"],
            "domain": domain_names.get(row["domain_id"], ""),
            "judge_passed": verdict.get("passed"),
            "judge_score": None if verdict.get("score") is None else float(verdict["score"]),
            "human_decision": decision.get("decision"),
        }
        values = parquet_row(gated.record(), about)
        line = json_line(values)
        writer.add(values, len(line))
        manifest.add(row, line)
        stats.written(row, gated.measure)
    writer.close()
