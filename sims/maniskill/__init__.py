"""The maniskill simulator backend (optional extra)."""
