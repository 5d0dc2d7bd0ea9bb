"""Shared by the trainer tests (pytest puts this folder on the path of its subfolders, so
``toy_env`` and ``tiny_chunk_rl`` import from ``chunk_rl/`` and ``sft/`` too)."""
