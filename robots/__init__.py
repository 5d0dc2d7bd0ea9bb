"""Robot descriptions (MJCF assets and names) and batched controllers."""
