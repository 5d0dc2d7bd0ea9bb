"""LeRobot 0.4.2's HIL-SERL SAC on gym-hil's pick-cube from state; run with .venv-lerobot's Python.

    .venv-lerobot/bin/python benchmarks/lerobot_gym_hil_sac.py --dataset DEMOS --env-steps N --out RESULT.json

The side of ``benchmarks/gym_hil_sac.py`` that is LeRobot's. Its parts are LeRobot's own:
``SACPolicy`` (networks, ``forward(model=critic|actor|temperature)``, ``update_target_networks``,
``update_temperature``), the learner's ``make_optimizers_and_scheduler`` and
``concatenate_batch_transitions``, and ``ReplayBuffer`` (online, and offline from the demonstrations
through ``ReplayBuffer.from_lerobot_dataset``). What this script adds is the loop that LeRobot's
learner and actor processes run between them, made synchronous: per env step, ``utd_ratio`` critic
updates on half-online, half-demonstration minibatches, then one actor and temperature update (the
learner's order), so that both learners of the benchmark do a fixed number of updates per env step.
Why not the actor/learner processes themselves: their actor makes gym-hil with ``image_obs=True``
(two rendered cameras, no cube position), and their learner updates as fast as it can beside the
actor, so the updates per env step would depend on the machine's speed.

Only LeRobot, torch, NumPy, Gymnasium and gym-hil are imported (vla-rl is not installed here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types
from pathlib import Path

import gym_hil  # noqa: F401  (registers gym_hil/*)
import gymnasium as gym
import numpy as np
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.policies.sac.configuration_sac import SACConfig
from lerobot.policies.sac.modeling_sac import SACPolicy
from lerobot.rl.buffer import ReplayBuffer, concatenate_batch_transitions
from lerobot.rl.learner import make_optimizers_and_scheduler
from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_STATE

GYM_HIL_ID = "gym_hil/PandaPickCube-v0"
DATASET_CUBE_KEY = "observation.privileged"
"""The shared dataset's key for the cube position; LeRobot's SAC reads it as ``OBS_ENV_STATE``."""
UNIT_TO_ENV = np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)
"""Unit action (policy output, dataset) -> gym-hil action: the gripper's [-1, 1] is gym-hil's [0, 2]."""


def observation(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {
        OBS_STATE: torch.as_tensor(obs["agent_pos"], dtype=torch.float32).unsqueeze(0),
        OBS_ENV_STATE: torch.as_tensor(obs["environment_state"], dtype=torch.float32).unsqueeze(0),
    }


def rename_cube_key(batch: dict) -> dict:
    for side in ("state", "next_state"):
        batch[side][OBS_ENV_STATE] = batch[side].pop(DATASET_CUBE_KEY)
    return batch


def make_policy(args: argparse.Namespace) -> SACPolicy:
    config = SACConfig(
        input_features={
            OBS_STATE: PolicyFeature(type=FeatureType.STATE, shape=(18,)),
            OBS_ENV_STATE: PolicyFeature(type=FeatureType.ENV, shape=(3,)),
        },
        output_features={ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(4,))},
        device="cpu",
        storage_device="cpu",
        use_torch_compile=False,
        num_critics=args.num_critics,
        utd_ratio=args.utd_ratio,
        temperature_init=args.temperature_init,
        online_step_before_learning=args.learning_starts,
        dataset_stats=None,
    )
    return SACPolicy(config)


def update(policy: SACPolicy, optimizers: dict, online: ReplayBuffer, offline: ReplayBuffer, batch_size: int):
    """The learner's ``utd_ratio`` critic updates, then one actor and one temperature update."""
    clip = policy.config.grad_clip_norm
    for index in range(policy.config.utd_ratio):
        batch = concatenate_batch_transitions(
            online.sample(batch_size // 2), rename_cube_key(offline.sample(batch_size // 2))
        )
        forward_batch = {
            ACTION: batch[ACTION],
            "reward": batch["reward"],
            "state": batch["state"],
            "next_state": batch["next_state"],
            "done": batch["done"],
            "observation_feature": None,
            "next_observation_feature": None,
        }
        loss = policy.forward(forward_batch, model="critic")["loss_critic"]
        optimizers["critic"].zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.critic_ensemble.parameters(), max_norm=clip)
        optimizers["critic"].step()
        if index == policy.config.utd_ratio - 1:
            for name, params in (("actor", policy.actor.parameters()), ("temperature", [policy.log_alpha])):
                loss = policy.forward(forward_batch, model=name)[f"loss_{name}"]
                optimizers[name].zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, max_norm=clip)
                optimizers[name].step()
            policy.update_temperature()
        policy.update_target_networks()


@torch.no_grad()
def deterministic_action(policy: SACPolicy, obs: dict[str, torch.Tensor]) -> np.ndarray:
    _, _, means = policy.actor(obs, None)
    return torch.tanh(means)[0].numpy()


def evaluate(policy: SACPolicy, episodes: int, seed: int) -> float:
    env = gym.make(GYM_HIL_ID, image_obs=False, reset_delay_seconds=0.0)
    successes = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        while True:
            action = deterministic_action(policy, observation(obs))
            obs, _, terminated, truncated, info = env.step(action + UNIT_TO_ENV)
            if terminated or truncated:
                successes += bool(info.get("succeed", False))
                break
    env.close()
    return successes / episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="the shared LeRobot v3.0 demonstrations")
    parser.add_argument("--env-steps", type=int, required=True)
    parser.add_argument("--learning-starts", type=int, default=1000, help="random env steps first")
    parser.add_argument("--utd-ratio", type=int, default=4, help="critic updates per env step")
    parser.add_argument("--batch-size", type=int, default=256, help="half online, half demonstrations")
    parser.add_argument("--num-critics", type=int, default=2)
    parser.add_argument("--temperature-init", type=float, default=0.01)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--eval-seed", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    policy = make_policy(args)
    policy.train()
    optimizers, _ = make_optimizers_and_scheduler(types.SimpleNamespace(policy=policy.config), policy)
    demos = LeRobotDataset("local/gym_hil_pick_cube", root=args.dataset)
    offline = ReplayBuffer.from_lerobot_dataset(
        demos, device="cpu", state_keys=[OBS_STATE, DATASET_CUBE_KEY], use_drq=False
    )
    online = ReplayBuffer(
        capacity=max(args.env_steps, 1), device="cpu", state_keys=[OBS_STATE, OBS_ENV_STATE], use_drq=False
    )

    env = gym.make(GYM_HIL_ID, image_obs=False, reset_delay_seconds=0.0)
    obs, _ = env.reset(seed=args.seed)
    step_seconds: list[float] = []
    episodes = successes = 0
    start = time.perf_counter()
    for step in range(args.env_steps):
        tick = time.perf_counter()
        state = observation(obs)
        if step < args.learning_starts:
            action = rng.uniform(-1.0, 1.0, 4).astype(np.float32)
        else:
            with torch.no_grad():
                action = policy.select_action(state)[0].numpy()
        obs, reward, terminated, truncated, info = env.step(action + UNIT_TO_ENV)
        online.add(
            state=state,
            action=torch.as_tensor(action).unsqueeze(0),
            reward=float(reward),
            next_state=observation(obs),
            done=bool(terminated),
            truncated=bool(truncated),
        )
        if terminated or truncated:
            episodes += 1
            successes += bool(info.get("succeed", False))
            obs, _ = env.reset()
        if len(online) >= args.learning_starts:
            update(policy, optimizers, online, offline, args.batch_size)
        step_seconds.append(time.perf_counter() - tick)
    env.close()
    wall_s = time.perf_counter() - start
    policy.eval()
    success = evaluate(policy, args.eval_episodes, args.eval_seed)
    learning = step_seconds[args.learning_starts :] or step_seconds
    result = {
        "learner": "lerobot_sac",
        "env_steps": args.env_steps,
        "demo_transitions": len(offline),
        "training_episodes": episodes,
        "training_successes": successes,
        "eval_episodes": args.eval_episodes,
        "success_rate": success,
        "wall_s": wall_s,
        "median_s_per_env_step": statistics.median(learning),
        "mean_s_per_env_step": wall_s / max(args.env_steps, 1),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
