"""Hydra configuration files (installed as package data so ``vla-rl`` finds them anywhere)."""
