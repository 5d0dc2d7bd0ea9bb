"""Supervised fine-tuning (``vla-rl sft``) of chunk policies on demonstrations."""
