"""Rows set aside (late rows, dead letters), with their reasons:
``set_aside/<input>/v=<v>/p=<p>.parquet``, and ``set_aside/<input>/schema.parquet`` (no rows)
recording their columns, so a reader finding no rows still gets them."""

from __future__ import annotations

from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.runtime.checkpoint.files import CheckpointFiles

__all__ = ["SetAside"]


class SetAside:
    """Reads and writes one checkpoint's set-aside rows (see module)."""

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files

    def write(self, input_name: str, version: int, partition: int, table: pa.Table) -> None:
        """Store ``input_name``'s rows that ``partition`` set aside in ``version``."""
        def produce(sink: BinaryIO) -> None:
            pq.write_table(table, sink)

        self.files.write(f"set_aside/{input_name}/v={version}/p={partition}.parquet", produce)

    def write_schema(self, input_name: str, schema: pa.Schema) -> None:
        """Record the columns of ``input_name``'s set-aside rows as an empty Parquet file, unless
        recorded."""
        rel = f"set_aside/{input_name}/schema.parquet"
        def produce(sink: BinaryIO) -> None:
            pq.write_table(schema.empty_table(), sink)

        if not self.files.exists(rel):
            self.files.write(rel, produce)

    def uri(self, input_name: str) -> str | None:
        """URI of input's set-aside rows (Parquet, partitioned by v and p); None if there are none."""
        rel = f"set_aside/{input_name}"
        return self.files.location(rel) if self.files.exists(rel) else None
