"""The isaaclab simulator backend (needs Isaac Lab 3.x with Isaac Sim, installed separately)."""
