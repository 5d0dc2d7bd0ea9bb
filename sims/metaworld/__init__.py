"""The metaworld simulator backend (optional extra)."""
