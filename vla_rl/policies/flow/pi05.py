"""pi0.5 as a ChunkPolicy: a LeRobot ``pi05`` folder on transformers' ``PI05ForConditionalGeneration``.

Everything of ``Pi0Policy`` holds (prefix cache, stochastic denoising chain, LeRobot preprocessing,
saving) except where pi0.5 differs from pi0: the state reaches the model only through the prompt
(``"Task: ..., State: <bins>;\\nAction: "``, see ``lerobot_preprocessing``), so the action expert has
no state token, and the denoising time conditions every expert norm (adaRMS) instead of being mixed
into the action tokens. The value head therefore has no token that depends on the observation alone:
it reads the mean of the action tokens' expert features at the chain's first step (t = 1), a feature
of the observation and of the initial noise.
"""

from __future__ import annotations

import torch
from transformers import PI05ForConditionalGeneration

from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi0_prefix import PrefixCache


class Pi05Policy(Pi0Policy):
    """Observation -> action chunk with pi0.5, imported from a LeRobot ``pi05`` folder."""

    registry_name = "pi05"
    model_class = PI05ForConditionalGeneration
    lerobot_type = "pi05"

    @classmethod
    def build(cls, **kwargs: object) -> Pi05Policy:
        raise ConfigError(
            "config key 'policy.init_from': pi05 starts from a LeRobot pi05 folder (there is no fresh "
            "pi0.5 to build)"
        )

    def state_input(self, state: torch.Tensor) -> dict[str, torch.Tensor]:
        """No state input: pi0.5's state is in the prompt."""
        return {}

    def velocity_and_std(
        self, prefix: PrefixCache, x_t: torch.Tensor, t: float | torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Velocity, the noise head's std on the action tokens' expert features (``flow_noise``;
        else None) and the value feature: their mean [N, H]."""
        velocity, hidden = self.velocity(prefix, x_t, t)
        std = None if self.noise_head is None else self.noise_head(hidden)
        return velocity, std, hidden.mean(1)
