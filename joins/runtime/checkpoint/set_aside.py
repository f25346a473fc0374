"""Rows set aside (late rows, dead letters), with their reasons:
``set_aside/<input>/v=<v>/p=<p>.parquet``, and ``set_aside/<input>/schema.parquet`` (no rows)
recording their columns, so a reader finding no rows still gets them."""

from __future__ import annotations

from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.errors import CheckpointDamagedError
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
        recorded as they are (an input whose columns evolved records its new ones)."""
        rel = f"set_aside/{input_name}/schema.parquet"
        def produce(sink: BinaryIO) -> None:
            pq.write_table(schema.empty_table(), sink)

        if not self.files.exists(rel) or not self.read_schema(input_name).equals(schema):
            self.files.write(rel, produce)

    def read_schema(self, input_name: str) -> pa.Schema:
        """The columns recorded by :meth:`write_schema` (an empty schema if none are)."""
        rel = f"set_aside/{input_name}/schema.parquet"
        if not self.files.exists(rel):
            return pa.schema([])
        try:
            return pq.read_schema(self.files.path(rel), filesystem=self.files.fs).remove_metadata()
        except (pa.ArrowInvalid, OSError) as exc:
            raise self.damaged(self.files.path(rel), exc) from exc

    def read(self, path: str, columns: list[str] | None = None) -> pa.Table:
        """The rows of the set-aside file at filesystem path ``path`` (``columns``: None, all).
        Raises :class:`CheckpointDamagedError` naming the file when it is not a whole Parquet
        file (truncated, or not Parquet)."""
        try:
            return pq.read_table(path, columns=columns, filesystem=self.files.fs)
        except (pa.ArrowInvalid, OSError) as exc:
            raise self.damaged(path, exc) from exc

    def check(self, path: str) -> None:
        """Raise :class:`CheckpointDamagedError` (as :meth:`read`) unless the set-aside file at
        filesystem path ``path`` ends in a whole Parquet footer (one read of its tail)."""
        try:
            with self.files.fs.open_input_file(path) as fh:
                pq.read_metadata(fh)
        except (pa.ArrowInvalid, OSError) as exc:
            raise self.damaged(path, exc) from exc

    def files_under(self, input_name: str | None = None) -> list[str]:
        """The filesystem paths of every set-aside file (of ``input_name``; None: of every input),
        sorted; ``schema.parquet`` records included."""
        rel = "set_aside" if input_name is None else f"set_aside/{input_name}"
        return sorted(i.path for i in self.files.entries(rel, recursive=True)
                      if i.is_file and i.path.endswith(".parquet"))

    def count(self, input_name: str, version: int) -> int:
        """How many rows of ``input_name`` were set aside in ``version`` (every partition's file;
        one listing, then each file's footer)."""
        found = [i.path for i in self.files.entries(f"set_aside/{input_name}/v={version}")
                 if i.is_file and i.path.endswith(".parquet")]
        rows = 0
        for path in found:
            try:
                with self.files.fs.open_input_file(path) as fh:
                    rows += pq.read_metadata(fh).num_rows
            except (pa.ArrowInvalid, OSError) as exc:
                raise self.damaged(path, exc) from exc
        return rows

    def damaged(self, path: str, exc: BaseException) -> CheckpointDamagedError:
        """The error for the set-aside file at filesystem path ``path`` that cannot be read."""
        where = self.files.location(self.files.rel(path))
        return CheckpointDamagedError(
            f"set-aside file {where} is damaged (not a whole Parquet file: {exc}), so its rows cannot be "
            "read. Restore it from a copy of the checkpoint; or, to read the other rows set aside, move "
            "it out of the checkpoint (the rows in it are then lost). `streamjoin checkpoint verify` "
            "lists every damaged file", path=where)

    def uri(self, input_name: str) -> str | None:
        """URI of input's set-aside rows (Parquet, partitioned by v and p); None if there are none."""
        rel = f"set_aside/{input_name}"
        return self.files.location(rel) if self.files.exists(rel) else None
