"""The isaaclab simulator backend (optional extra)."""
