"""A frozen chunk policy and the real env, presented to an off-policy learner as one ``BatchedEnv``.

``frozen_policy.mode`` (``FrozenPolicyConfig``) picks what the learner's action means:

* ``dsrl`` (``NoiseActionEnv``, DSRL: Wagenmaker et al. 2025): the initial noise of a frozen flow
  policy's denoising chain, flattened ([chunk_len * noise width], in [-1, 1], times
  ``noise_scale``). The deterministic chain (``FlowChainPolicy.denoise``) maps it to a chunk whose
  first ``execute_steps`` actions the env executes. One transition is one chunk: its reward is the
  plain (undiscounted) sum of the rewards of the steps executed, so ``algorithm.gamma`` discounts
  per chunk. A world whose episode ends inside the chunk holds still (zero action) for the rest of
  it, as chunk rollouts do (``vla_rl.rollout.collector``); the transition then ends its episode.
* ``residual`` (``ResidualActionEnv``): a correction added to each action of a frozen chunk policy
  of any family; the env receives ``clip(frozen + residual_scale * action, -1, 1)``. The frozen
  policy plans a chunk every ``execute_steps`` steps (noise-free: ``deterministic``); its action for
  the coming step is the observation key ``base_action``, so actor and critics see what they correct.

The learner reads the env's vector keys; the frozen policy reads the whole observation (images
included). Both wrappers pass the env's success flags and episode statistics through (returns
undiscounted, lengths in control steps), snapshot with the env (the residual's plans too) and
resume exactly: the frozen policy draws nothing of its own (a flow policy's noise-free chain still
starts from noise drawn from torch's global generator, which checkpoints save).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import yaml

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import BatchedEnv, Observation, StepResult, adopt_spec, env_spec
from vla_rl.envs.batching import module_device, obs_to_device, select_worlds
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.flow.chain_policy import FlowChainPolicy
from vla_rl.policies.registry import chunk_policy_class, load_chunk_policy
from vla_rl.training.checkpoint import CONFIG_FILENAME, POLICY_DIRNAME, resolve_checkpoint_dir
from vla_rl.training.env_fit import check_policy_env
from vla_rl.training.off_policy.frozen_policy_config import BASE_ACTION_KEY, FrozenPolicyConfig

STATE_KEY = "frozen_policy_env"
"""The wrapper's own entry in the env's snapshot (``residual``: the plans and their cursors)."""


class FrozenPolicyEnv(BatchedEnv):
    """What both modes share: ``env``'s size, spaces and snapshot, and the frozen ``policy``."""

    def __init__(self, env: BatchedEnv, policy: ChunkPolicy, execute_steps: int) -> None:
        adopt_spec(self, env_spec(env))
        self.env, self.policy = env, policy
        self.execute_steps = min(execute_steps, policy.chunk_len) if execute_steps > 0 else policy.chunk_len
        """Actions of each frozen chunk executed before the next plan."""

    def frozen_chunks(self, obs: Observation, worlds: torch.Tensor) -> torch.Tensor:
        """The frozen policy's noise-free chunks [M, chunk_len, A] (CPU) for the rows ``worlds`` [M]."""
        rows = obs_to_device(select_worlds(obs, worlds), module_device(self.policy))
        return self.policy.sample(rows, deterministic=True).actions.float().cpu()

    def world_seed(self, seed: int, world: int) -> int | list[int]:
        return self.env.world_seed(seed, world)

    def close(self) -> None:
        self.env.close()


class NoiseActionEnv(FrozenPolicyEnv):
    """DSRL: the action is the flow policy's initial noise; a step executes the chunk it denoises to."""

    def __init__(
        self, env: BatchedEnv, policy: FlowChainPolicy, noise_scale: float, execute_steps: int
    ) -> None:
        super().__init__(env, policy, execute_steps)
        self.noise_scale = noise_scale
        self.noise_shape = policy.noise_shape
        self.action_space = gym.spaces.Box(-1.0, 1.0, (math.prod(self.noise_shape),), np.float32)
        self.action_scale = None
        self.max_episode_steps = math.ceil(env.max_episode_steps / self.execute_steps)
        self.control_hz = env.control_hz / self.execute_steps
        self.obs: Observation | None = None
        """The env's latest observation: what the chain is conditioned on at the next step."""

    def reset(self, seed=None, env_ids: torch.Tensor | None = None) -> tuple[Observation, dict[str, Any]]:  # noqa: ANN001
        self.obs, info = self.env.reset(seed=seed, env_ids=env_ids)
        return self.obs, info

    def chunk_of(self, action: torch.Tensor) -> torch.Tensor:
        """The chunk [N, chunk_len, A] (CPU) that the chain makes from the noise ``action`` [N, D]."""
        noise = action.detach().float().clamp(-1.0, 1.0).view(len(action), *self.noise_shape)
        device = module_device(self.policy)
        assert self.obs is not None, "reset() first"
        chunk = self.policy.denoise(obs_to_device(self.obs, device), self.noise_scale * noise.to(device))
        return chunk.float().cpu()

    def step(self, action: torch.Tensor) -> StepResult:
        result = execute_chunk(self.env, self.chunk_of(action)[:, : self.execute_steps])
        self.obs = result.obs
        return result

    def state_dict(self) -> dict[str, Any]:
        return self.env.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        self.obs = self.env.load_state_dict(state)
        return self.obs


class ResidualActionEnv(FrozenPolicyEnv):
    """Residual RL: the action corrects the frozen policy's action by at most ``residual_scale``."""

    def __init__(
        self, env: BatchedEnv, policy: ChunkPolicy, residual_scale: float, execute_steps: int
    ) -> None:
        super().__init__(env, policy, execute_steps)
        self.residual_scale = residual_scale
        width = env.action_space.shape[0]
        self.observation_space = with_base_action_space(env.observation_space, width)
        self.plan = torch.zeros(env.num_envs, policy.chunk_len, width)
        """Each world's current frozen chunk."""
        self.cursor = torch.full((env.num_envs,), self.execute_steps, dtype=torch.long)
        """Index of each world's next action in its plan (``execute_steps``: plan again)."""

    def replan(self, obs: Observation, worlds: torch.Tensor) -> None:
        """New frozen chunks for the worlds of the bool mask ``worlds`` [N]."""
        ids = torch.nonzero(worlds).flatten()
        if len(ids):
            self.plan[ids] = self.frozen_chunks(obs, ids)
            self.cursor[ids] = 0

    def base_action(self) -> torch.Tensor:
        """The frozen policy's action [N, A] for each world's coming step."""
        return self.plan[torch.arange(self.num_envs), self.cursor]

    def with_base(self, obs: Observation, base: torch.Tensor) -> Observation:
        return {**obs, BASE_ACTION_KEY: base.to(self.device)}

    def reset(self, seed=None, env_ids: torch.Tensor | None = None) -> tuple[Observation, dict[str, Any]]:  # noqa: ANN001
        obs, info = self.env.reset(seed=seed, env_ids=env_ids)
        worlds = torch.ones(self.num_envs, dtype=torch.bool)
        if env_ids is not None:
            worlds = torch.zeros(self.num_envs, dtype=torch.bool)
            worlds[torch.as_tensor(env_ids).cpu()] = True
        self.replan(obs, worlds)
        return self.with_base(obs, self.base_action()), info

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        """What the env receives [N, A] (``corrected_action``)."""
        return corrected_action(self.base_action(), action.detach().float().cpu(), self.residual_scale)

    def step(self, action: torch.Tensor) -> StepResult:
        result = self.env.step(self.env_action(action).to(self.env.device))
        done = result.done.cpu()
        self.cursor += 1
        # The base action at an ended episode's final observation (what its truncation bootstraps
        # from): the plan's next action, or a new plan's first where the plan is used up.
        final = result.info["final_obs"]
        final_base = self.plan[torch.arange(self.num_envs), self.cursor.clamp(max=self.execute_steps - 1)]
        used_up = self.cursor >= self.execute_steps
        ended_used_up = torch.nonzero(done & used_up).flatten()
        if len(ended_used_up):
            final_base[ended_used_up] = self.frozen_chunks(final, ended_used_up)[:, 0]
        self.replan(result.obs, done | used_up)
        base = self.base_action()
        result.obs = self.with_base(result.obs, base)
        result.info["final_obs"] = self.with_base(final, torch.where(done[:, None], final_base, base))
        return result

    def state_dict(self) -> dict[str, Any]:
        return {
            **self.env.state_dict(),
            STATE_KEY: {"plan": self.plan.clone(), "cursor": self.cursor.clone()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        state = dict(state)
        own = state.pop(STATE_KEY)
        obs = self.env.load_state_dict(state)
        self.plan, self.cursor = own["plan"].clone(), own["cursor"].clone()
        return self.with_base(obs, self.base_action())


def with_base_action_space(space: gym.spaces.Dict, action_dim: int) -> gym.spaces.Dict:
    """``space`` with the ``base_action`` key of residual RL: the frozen action, [action_dim] in [-1, 1]."""
    base = gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)
    return gym.spaces.Dict({**space.spaces, BASE_ACTION_KEY: base})


def corrected_action(base: torch.Tensor, residual: torch.Tensor, residual_scale: float) -> torch.Tensor:
    """What residual RL executes: ``clip(base + residual_scale * clip(residual, -1, 1), -1, 1)``."""
    return (base + residual_scale * residual.clamp(-1.0, 1.0)).clamp(-1.0, 1.0)


def residual_label(base: torch.Tensor, action: torch.Tensor, residual_scale: float) -> torch.Tensor:
    """The residual that would have produced ``action`` from ``base`` (both in [-1, 1]), clipped to
    the residual's range: ``clip((action - base) / residual_scale, -1, 1)``. How a takeover's action
    becomes a residual learner's label; exact unless the takeover moved further than
    ``residual_scale`` from the frozen action."""
    return ((action - base) / residual_scale).clamp(-1.0, 1.0)


def execute_chunk(env: BatchedEnv, chunk: torch.Tensor) -> StepResult:
    """Execute ``chunk`` [N, H, A] in ``env``, one action per step; a world whose episode ends holds
    still (zero action) for the rest of the chunk. The result is one step of the chunk: the
    observation after it, the sum of each world's rewards until its episode ended, that episode's
    ``terminated`` / ``truncated``, ``final_obs`` and ``episode`` statistics, and ``success`` at
    its last step executed."""
    num_envs, horizon = chunk.shape[:2]
    running = torch.ones(num_envs, dtype=torch.bool)
    reward = torch.zeros(num_envs)
    terminated = torch.zeros(num_envs, dtype=torch.bool)
    truncated = torch.zeros(num_envs, dtype=torch.bool)
    success = torch.zeros(num_envs, dtype=torch.bool)
    final_rows: dict[int, Observation] = {}
    episode: dict[str, torch.Tensor] | None = None
    for j in range(horizon):
        if j < horizon - 1:  # the next decision reads only the observation after the chunk
            env.skip_images_next_step()
        result = env.step(torch.where(running[:, None], chunk[:, j], 0.0).to(env.device))
        done = result.done.cpu()
        reward += torch.where(running, result.reward.cpu().float(), 0.0)
        success = torch.where(running, result.info["success"].cpu().bool(), success)
        ended = running & done
        if ended.any():
            terminated |= ended & result.terminated.cpu()
            truncated |= ended & result.truncated.cpu()
            stats = {key: value.cpu() for key, value in result.info["episode"].items()}
            episode = episode or {key: torch.zeros_like(value) for key, value in stats.items()}
            for key, value in stats.items():
                episode[key] = torch.where(ended, value, episode[key])
            for world in torch.nonzero(ended).flatten().tolist():
                final_rows[world] = select_worlds(result.info["final_obs"], torch.tensor([world]))
        running &= ~done
        obs = result.obs
    info: dict[str, Any] = {"success": success.to(env.device), "final_obs": with_rows(obs, final_rows)}
    if episode is not None:
        info["episode"] = {key: value.to(env.device) for key, value in episode.items()}
    device = env.device
    return StepResult(obs, reward.to(device), terminated.to(device), truncated.to(device), info)


def with_rows(obs: Observation, rows: dict[int, Observation]) -> Observation:
    """A copy of ``obs`` whose world ``i`` is ``rows[i]`` (a one-world observation), for each ``i`` in
    ``rows``."""
    if not rows:
        return obs
    merged: Observation = {
        key: value.clone() if isinstance(value, torch.Tensor) else list(value) for key, value in obs.items()
    }
    for world, row in rows.items():
        for key, value in merged.items():
            value[world] = row[key][0]
    return merged


def load_frozen_policy(cfg: FrozenPolicyConfig, device: str) -> ChunkPolicy | None:
    """The frozen policy ``cfg`` names (None when ``mode`` is ``none``), in eval mode without
    gradients, on ``device``."""
    if not cfg.active:
        return None
    assert cfg.checkpoint is not None  # frozen_policy_checks
    path = Path(cfg.checkpoint)
    try:
        checkpoint: Path | None = resolve_checkpoint_dir(path)
    except FileNotFoundError:
        checkpoint = None  # a policy folder itself
    directory = path if checkpoint is None else checkpoint / POLICY_DIRNAME
    if not directory.is_dir():
        raise ConfigError(
            f"config key 'frozen_policy.checkpoint': {directory} is not a folder (an SFT or RL run, one of "
            "its checkpoints, or a policy folder)"
        )
    name = cfg.name or saved_policy_name(checkpoint)
    if cfg.mode == "dsrl" and not issubclass(chunk_policy_class(name), FlowChainPolicy):
        raise ConfigError(
            f"config key 'frozen_policy.mode': dsrl acts on the noise of a flow policy (flow_mlp, pi0, pi05, "
            f"smolvla); {name!r} has none (frozen_policy.mode=residual works with any family)"
        )
    policy = load_chunk_policy(name, directory).to(torch.device(device)).eval().requires_grad_(False)
    if cfg.execute_steps > policy.chunk_len:
        raise ConfigError(
            f"config key 'frozen_policy.execute_steps': {cfg.execute_steps} is more than the frozen "
            f"policy's chunk of {policy.chunk_len}"
        )
    limit_decoding = getattr(policy, "limit_decoding", None)  # token VLAs decode only what runs
    if limit_decoding is not None:
        limit_decoding(cfg.execute_steps if cfg.execute_steps > 0 else policy.chunk_len)
    return policy


def saved_policy_name(checkpoint: Path | None) -> str:
    """``policy.name`` of the ``config.yaml`` in ``checkpoint`` (an SFT or RL run's)."""
    config = None if checkpoint is None else checkpoint / CONFIG_FILENAME
    saved = yaml.safe_load(config.read_text()) if config is not None and config.is_file() else None
    name = ((saved or {}).get("policy") or {}).get("name")
    if not name:
        raise ConfigError(
            "config key 'frozen_policy.name': the frozen policy's folder has no run config naming its "
            "family; give it (flow_mlp, pi0, token_vla, ...)"
        )
    return str(name)


def wrap_with_frozen_policy(
    env: BatchedEnv, policy: ChunkPolicy | None, cfg: FrozenPolicyConfig
) -> BatchedEnv:
    """``env`` itself without a frozen policy, else the wrapper of ``cfg.mode``."""
    if policy is None or not cfg.active:
        return env
    check_policy_env(policy, env)
    if policy.action_dim != env.action_space.shape[0]:
        raise ConfigError(
            f"config key 'frozen_policy.checkpoint': the frozen policy acts in {policy.action_dim} "
            f"dimensions, the env in {env.action_space.shape[0]}"
        )
    if cfg.mode == "dsrl":
        assert isinstance(policy, FlowChainPolicy)  # load_frozen_policy
        return NoiseActionEnv(env, policy, cfg.noise_scale, cfg.execute_steps)
    return ResidualActionEnv(env, policy, cfg.residual_scale, cfg.execute_steps)
