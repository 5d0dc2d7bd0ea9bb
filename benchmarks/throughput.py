"""Throughput side by side in one run, on the same task, network sizes and batch.

1. raw MuJoCo physics (the faster of ``mujoco.rollout`` and ``mujoco.batch`` over the task's own
   models, same substeps per control step, both cores) -- the ceiling for any rollout on this
   machine -- with the arm held at home and with the arm moving as the controller drives it (what a
   rollout actually simulates);
2. vla-rl rollout only (simulation + controller + observation + policy inference), with all worlds
   stepped at once and pipelined in two stages (``env.pipeline_stages=2``: one half's physics runs
   while the policy acts for the other half);
3. vla-rl end-to-end PPO (rollout + update), both ways;
4. stable-baselines3 PPO, with the same MLP sizes, activation, rollout length, minibatch size and
   epochs, twice: as SB3 users run it (``DummyVecEnv``, SB3's default vector env, over one
   ``gymnasium.Env`` per world) and on vla-rl's batched simulator (``BatchedEnvAsSB3VecEnv``), which
   separates what the batched simulation layer buys from what the training loop costs.

Each figure is the median of ``--repeats`` timed runs after a warm-up.

    python -m benchmarks.throughput [--task reach] [--num-envs N] [--iterations 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from vla_rl.sims.mujoco.steppers import DEFAULT_STEPPER, STEPPERS

from benchmarks.common import machine_line, random_action_steps_per_s
from vla_rl.config import compose_train_config
from vla_rl.config.schema import TrainConfig
from vla_rl.envs import make_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.policies.obs_keys import with_env_obs_keys
from vla_rl.training.components import build_training_components


def _config(task: str, num_envs: int | None, threads: int, stages: int = 1) -> TrainConfig:
    """The default training config on ``task`` (its world count unless ``num_envs`` is given)."""
    overrides = [f"env.task={task}", f"env.num_threads={threads}", f"env.pipeline_stages={stages}", "seed=0"]
    if num_envs is not None:
        overrides.append(f"env.num_envs={num_envs}")
    return compose_train_config(overrides)


def raw_physics_steps_per_s(cfg: TrainConfig, repeats: int, moving: bool = False) -> float:
    """Median over ``repeats`` of the faster raw-physics engine (``mujoco.rollout``, ``mujoco.batch``)."""
    from benchmarks.physics_reference import fastest_physics_env_steps_per_s

    rates = [fastest_physics_env_steps_per_s(cfg.env, moving=moving) for _ in range(repeats)]
    return statistics.median(rates)


def env_step_rate(cfg: TrainConfig, stepper: str, steps: int, repeats: int) -> float:
    """Median env-steps/s of ``env.step`` alone (controller, physics, observations) with random actions."""
    import dataclasses

    env = make_env(dataclasses.replace(cfg.env, options={**cfg.env.options, "stepper": stepper}))
    env.reset(seed=cfg.seed)
    rate = random_action_steps_per_s(env, steps, repeats, warmup_steps=5)
    env.close()
    return rate


def vla_rl_rates(cfg: TrainConfig, iterations: int, repeats: int) -> tuple[float, float, float, float]:
    """Medians of rollout-only env-steps/s, of end-to-end PPO env-steps/s, and of the ratios
    rollout / raw physics (held posture, then moving arm), with raw physics measured right after
    each timed run (the machine's speed drifts between minutes, so each ratio compares neighbours)."""
    env = make_env(cfg.env)
    parts = build_training_components(cfg, env)
    obs, _ = env.reset(seed=cfg.seed)
    steps = cfg.algorithm.num_steps * env.num_envs
    obs, _ = parts.collector.collect(obs)  # warm-up
    parts.algorithm.update(parts.buffer)
    rollout_rates, ppo_rates, held_ratios, moving_ratios = [], [], [], []
    for _ in range(repeats):
        rollout_s = 0.0
        start = time.perf_counter()
        for _ in range(iterations):
            t0 = time.perf_counter()
            obs, _ = parts.collector.collect(obs)
            rollout_s += time.perf_counter() - t0
            parts.algorithm.update(parts.buffer)
        total_s = time.perf_counter() - start
        rollout_rates.append(iterations * steps / rollout_s)
        ppo_rates.append(iterations * steps / total_s)
        held_ratios.append(rollout_rates[-1] / raw_physics_steps_per_s(cfg, 1))
        moving_ratios.append(rollout_rates[-1] / raw_physics_steps_per_s(cfg, 1, moving=True))
    env.close()
    medians = [statistics.median(v) for v in (rollout_rates, ppo_rates, held_ratios, moving_ratios)]
    return medians[0], medians[1], medians[2], medians[3]


def sb3_batched_vecenv(cfg: TrainConfig):  # noqa: ANN201 - an SB3 VecEnv
    from benchmarks.sb3_vecenv import BatchedEnvAsSB3VecEnv

    env = make_env(cfg.env)
    return BatchedEnvAsSB3VecEnv(env, _actor_keys(cfg, env))


def sb3_dummy_vecenv(cfg: TrainConfig):  # noqa: ANN201 - an SB3 VecEnv
    """SB3's default vector env over one-world envs (one core, ``mj_step`` per world)."""
    import dataclasses

    from stable_baselines3.common.vec_env import DummyVecEnv

    from benchmarks.sb3_vecenv import SingleWorldGymEnv

    one_world = dataclasses.replace(
        cfg.env, num_envs=1, num_threads=1, options={**cfg.env.options, "stepper": "threads"}
    )

    def world() -> SingleWorldGymEnv:
        env = make_env(one_world)
        return SingleWorldGymEnv(env, _actor_keys(cfg, env))

    return DummyVecEnv([world] * cfg.env.num_envs)


def _actor_keys(cfg: TrainConfig, env: BatchedEnv) -> tuple[str, ...]:
    """The observation keys our policy's actor reads on ``env``: the SB3 policy reads the same."""
    return tuple(with_env_obs_keys(cfg.policy, env.observation_space).actor_obs_keys or [])


def sb3_ppo_rate(cfg: TrainConfig, venv, iterations: int, repeats: int) -> float:  # noqa: ANN001
    from stable_baselines3 import PPO

    activations = {"elu": torch.nn.ELU, "relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}
    venv.seed(cfg.seed)
    algo = cfg.algorithm
    steps = algo.num_steps * venv.num_envs
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=algo.num_steps,
        batch_size=steps // algo.num_minibatches,
        n_epochs=algo.num_epochs,
        gamma=algo.gamma,
        gae_lambda=algo.gae_lambda,
        clip_range=algo.clip_ratio,
        learning_rate=algo.learning_rate,
        max_grad_norm=algo.max_grad_norm,
        policy_kwargs={
            "net_arch": {"pi": list(cfg.policy.hidden_sizes), "vf": list(cfg.policy.hidden_sizes)},
            "activation_fn": activations[cfg.policy.activation],
        },
        device="cpu",
        seed=cfg.seed,
        verbose=0,
    )
    model.learn(total_timesteps=steps)  # warm-up
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.learn(total_timesteps=iterations * steps, reset_num_timesteps=False)
        rates.append(iterations * steps / (time.perf_counter() - start))
    venv.close()
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reach")
    parser.add_argument("--num-envs", type=int, default=None, help="worlds (default: the task's own)")
    parser.add_argument("--threads", type=int, default=2, help="simulation threads (cores)")
    parser.add_argument("--iterations", type=int, default=5, help="PPO iterations per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    cfg = _config(args.task, args.num_envs, args.threads)
    torch.set_num_threads(cfg.torch_num_threads)
    print(f"machine: {machine_line()}")
    print(
        f"task {args.task}, {cfg.env.num_envs} worlds, {cfg.env.control_hz:g} Hz control, "
        f"rollout {cfg.algorithm.num_steps} steps, MLP {list(cfg.policy.hidden_sizes)}, "
        f"{cfg.algorithm.num_epochs} epochs x {cfg.algorithm.num_minibatches} minibatches, "
        f"torch threads {cfg.torch_num_threads}, sim threads {args.threads}"
    )
    physics = raw_physics_steps_per_s(cfg, args.repeats)
    physics_moving = raw_physics_steps_per_s(cfg, args.repeats, moving=True)
    env_rates = {name: env_step_rate(cfg, name, 50, args.repeats) for name in STEPPERS}
    rollout, ppo, held_ratio, moving_ratio = vla_rl_rates(cfg, args.iterations, args.repeats)
    staged_cfg = _config(args.task, args.num_envs, args.threads, stages=2)
    rollout2, ppo2, held_ratio2, moving_ratio2 = vla_rl_rates(staged_cfg, args.iterations, args.repeats)
    sb3_default = sb3_ppo_rate(cfg, sb3_dummy_vecenv(cfg), args.iterations, args.repeats)
    sb3_batched = sb3_ppo_rate(cfg, sb3_batched_vecenv(cfg), args.iterations, args.repeats)
    print(f"{'raw MuJoCo physics, arm held (fastest engine)':<46} {physics:>10,.0f} env-steps/s")
    print(f"{'raw MuJoCo physics, arm moving':<46} {physics_moving:>10,.0f} env-steps/s")
    for name, rate in env_rates.items():
        default = " (default)" if name == DEFAULT_STEPPER else ""
        label = f"vla-rl env.step only, stepper {name}{default}"
        print(f"{label:<46} {rate:>10,.0f} env-steps/s   {rate / physics:.2f} of raw")
    print(f"{'vla-rl rollout only (sim + policy)':<46} {rollout:>10,.0f} env-steps/s")
    print(f"{'vla-rl rollout only, 2 pipeline stages':<46} {rollout2:>10,.0f} env-steps/s")
    print(f"{'vla-rl PPO end to end':<46} {ppo:>10,.0f} env-steps/s")
    print(f"{'vla-rl PPO end to end, 2 pipeline stages':<46} {ppo2:>10,.0f} env-steps/s")
    print(f"{'SB3 PPO, DummyVecEnv of gymnasium envs':<46} {sb3_default:>10,.0f} env-steps/s")
    print(f"{'SB3 PPO on the vla-rl batched env':<46} {sb3_batched:>10,.0f} env-steps/s")
    print(f"ratio rollout / raw physics, arm held    : {held_ratio:.2f}  (target >= 0.60, paired runs)")
    print(f"ratio rollout / raw physics, arm moving  : {moving_ratio:.2f}  (target >= 0.60, paired runs)")
    print(f"ratio pipelined rollout / raw, arm held  : {held_ratio2:.2f}  (target >= 0.60, paired runs)")
    print(f"ratio pipelined rollout / raw, arm moving: {moving_ratio2:.2f}  (target >= 0.60, paired runs)")
    print(f"ratio vla-rl PPO / SB3 PPO (DummyVecEnv)  : {ppo / sb3_default:.2f}  (target >= 2.0)")
    print(f"ratio pipelined PPO / SB3 PPO (DummyVecEnv): {ppo2 / sb3_default:.2f}  (target >= 2.0)")
    print(f"ratio vla-rl PPO / SB3 PPO (batched env)  : {ppo / sb3_batched:.2f}")


if __name__ == "__main__":
    main()
