"""MuJoCo Warp: all worlds of a task in one batched model (optional extra ``warp``)."""
