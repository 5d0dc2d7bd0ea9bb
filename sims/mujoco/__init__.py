"""MuJoCo backend: scene assembly, randomisation, rendering and the batched environment."""
