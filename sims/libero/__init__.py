"""The libero simulator backend (optional extra)."""
