"""``meta/tasks.parquet`` of a LeRobot v3.0 dataset, both ways: the table as LeRobot writes it (the
instructions as the pandas index, ``task_index`` as the column) and the instructions read back from
LeRobot's file or ours."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vla_rl.data.lerobot_v3_layout import TASKS_PATH_V3

TASK_INDEX_COLUMN = "__index_level_0__"
"""Where pandas (which LeRobot reads ``meta/tasks.parquet`` with) keeps an unnamed index: the tasks."""


def tasks_table(tasks: dict[str, int]) -> pa.Table:
    """``meta/tasks.parquet``: ``task_index`` and the instruction, marked as the pandas index (as LeRobot
    writes it) so that ``pandas.read_parquet`` gives LeRobot's task-indexed frame."""
    ordered = sorted(tasks.items(), key=lambda item: item[1])
    table = pa.table(
        {
            "task_index": pa.array([index for _, index in ordered], pa.int64()),
            TASK_INDEX_COLUMN: pa.array([task for task, _ in ordered], pa.large_string()),
        }
    )
    pandas_meta = {
        "index_columns": [TASK_INDEX_COLUMN],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": None,
                "field_name": TASK_INDEX_COLUMN,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
    }
    return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


def read_tasks(root: Path) -> dict[int, str]:
    """task_index -> instruction from ``meta/tasks.parquet`` (the instruction is the pandas index column
    LeRobot writes, or a ``task`` column); empty when the file is absent."""
    path = root / TASKS_PATH_V3
    if not path.is_file():
        return {}
    table = pq.read_table(path)
    pandas_meta = json.loads((table.schema.metadata or {}).get(b"pandas", b"{}"))
    candidates = ["task", *[name for name in pandas_meta.get("index_columns", []) if isinstance(name, str)]]
    task_column = next((name for name in candidates if name in table.column_names), None)
    if task_column is None or "task_index" not in table.column_names:
        raise ValueError(f"{path} has no task_index and task columns (columns: {table.column_names})")
    indices, tasks = table.column("task_index").to_pylist(), table.column(task_column).to_pylist()
    return {int(index): str(task) for index, task in zip(indices, tasks, strict=True)}
