"""A tiny success classifier saved by the real code (``LearnedRewardModel.save_pretrained``), whose
verdict the test chooses: its head's last layer is zeroed and biased to a fixed success logit."""

from __future__ import annotations

from pathlib import Path

import torch

from vla_rl.rewards.learned import LearnedRewardConfig, LearnedRewardModel


def tiny_classifier(path: Path, success_logit: float) -> Path:
    """A success model on the ``front`` camera whose head always gives ``success_logit``."""
    model = LearnedRewardModel(
        LearnedRewardConfig(cameras=["front"], channels=[4], feature_dim=8, hidden_dims=[8])
    )
    with torch.no_grad():
        last = [m for m in model.heads.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.weight.zero_()
        last.bias.copy_(torch.tensor([success_logit, 0.0]))
    model.save_pretrained(path)
    return path
