"""Off-policy learning (SAC, RLPD) in the one loop: ``vla-rl train algorithm=sac|rlpd``."""
