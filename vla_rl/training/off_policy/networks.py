"""An off-policy run's networks (``SACPolicy``): built from its config for an env's spaces, or loaded
from its last checkpoint together with the frozen policy it acts through, as its own evaluations
run it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

from vla_rl.envs import make_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.policies.sac_networks import SACPolicy
from vla_rl.training.checkpoint import CONFIG_FILENAME, load_checkpoint, resolve_checkpoint_dir
from vla_rl.training.off_policy.config import OffPolicyConfig
from vla_rl.training.off_policy.config_load import OFF_POLICY_JOB
from vla_rl.training.off_policy.frozen_policy_env import load_frozen_policy, wrap_with_frozen_policy

EnvWrapper = Callable[[BatchedEnv], BatchedEnv]
"""Puts a run's frozen policy (if any) between its networks and an env."""


def build_networks(cfg: OffPolicyConfig, observation_space: gym.spaces.Dict, action_dim: int) -> SACPolicy:
    """``cfg``'s networks (``policy``: keys, sizes, camera encoder; ``algorithm``: critics) for an env
    with ``observation_space`` and ``action_dim`` actions, freshly initialised, on the CPU."""
    policy, algorithm = cfg.policy, cfg.algorithm
    return SACPolicy(
        policy.obs_keys,
        observation_space,
        action_dim,
        policy.hidden_sizes,
        algorithm.num_critics,
        algorithm.layer_norm,
        policy.activation,
        policy.cnn_channels,
        policy.cnn_kernel_stride,
        policy.cnn_feature_dim,
    )


def load_off_policy_run(run_dir: str | Path) -> tuple[SACPolicy, EnvWrapper]:
    """The networks of the last checkpoint of the off-policy run ``run_dir`` (or of that checkpoint
    folder), in eval mode, and the wrapper that puts its frozen policy between them and an env."""
    checkpoint = resolve_checkpoint_dir(run_dir)
    # Evaluating serves no actors: a remote learner's settings (and its unsaved token) do not apply.
    cfg = OFF_POLICY_JOB.load_file(checkpoint / CONFIG_FILENAME, ["source=local", "remote.token=null"])
    frozen = load_frozen_policy(cfg.frozen_policy, cfg.device)

    def wrap(env: BatchedEnv) -> BatchedEnv:
        return wrap_with_frozen_policy(env, frozen, cfg.frozen_policy)

    probe = wrap(make_env(dataclasses.replace(cfg.env, num_envs=1, pipeline_stages=1)))
    try:
        networks = build_networks(cfg, probe.observation_space, probe.action_space.shape[0])
    finally:
        probe.close()
    networks.load_state_dict(load_checkpoint(checkpoint).policy_state)
    return networks.eval(), wrap
