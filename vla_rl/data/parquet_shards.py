"""Many episodes' frames in one parquet file (LeRobot v3.0's data shards), written as they come.

A ``ParquetStream`` keeps one ``pyarrow.parquet.ParquetWriter`` open under a ``.partial`` name and
writes each episode's table as row groups of it, so adding an episode costs the same however many the
file already holds; ``finish`` writes the footer and moves the file into place.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vla_rl.data.lerobot_v3_layout import partial_path


class ParquetStream:
    """One parquet file being filled: ``add`` appends a table (every one with the first one's schema),
    ``finish`` closes the file and moves it to ``path``, ``discard`` removes it (finished or not)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.partial = partial_path(path)
        self.num_rows = 0
        """Rows written so far."""
        self._sink: pa.NativeFile | None = None
        self._writer: pq.ParquetWriter | None = None
        self.finished = False
        """Whether ``finish`` moved the file to ``path``."""

    def add(self, table: pa.Table) -> None:
        """Write ``table``'s rows after those already in the file."""
        if self._writer is None:
            self.partial.parent.mkdir(parents=True, exist_ok=True)
            self._sink = pa.OSFile(str(self.partial), "wb")
            self._writer = pq.ParquetWriter(self._sink, table.schema)
        elif not table.schema.equals(self._writer.schema):
            raise ValueError(
                f"{self.path}: columns {table.schema} differ from the file's {self._writer.schema}"
            )
        self._writer.write_table(table)
        self.num_rows += len(table)

    def size_mb(self) -> float:
        """Bytes written so far, in MiB."""
        return self._sink.tell() / 2**20 if self._sink is not None else 0.0

    def finish(self) -> None:
        """Write the footer, close the file and move it to ``path`` (atomically)."""
        if self._writer is None or self._sink is None:
            raise RuntimeError(f"no rows were written to {self.path}")
        self._writer.close()
        self._sink.close()
        os.replace(self.partial, self.path)
        self.finished = True

    def discard(self) -> None:
        """Close and remove the file (at ``path`` once finished: no reader may count on it yet)."""
        if self.finished:
            self.path.unlink(missing_ok=True)
            return
        if self._writer is not None:
            with contextlib.suppress(OSError, pa.ArrowException):  # e.g. a full disk: the file goes anyway
                self._writer.close()
        if self._sink is not None and not self._sink.closed:
            self._sink.close()
        self.partial.unlink(missing_ok=True)
