"""How each tutorial command runs in ``test_tutorials`` (``PLANS``), and the tiny sizes it runs at."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    tiny: tuple[str, ...] = ()
    expect: str = ""
    substitute: tuple[tuple[str, str], ...] = ()
    needs: str | None = None
    """``roscore`` or ``namespace``: skipped with the reason when this machine lacks it."""
    own_process: bool = False
    """Run ``vla-rl`` as its own process: a Ray driver inside pytest's process, whose output pytest
    captures, waited forever for its env workers."""


@dataclass(frozen=True)
class Validate:
    reason: str


@dataclass(frozen=True)
class NotRun:
    reason: str


QUIET = ("logger.progress_bar=false", "logger.tensorboard=false", "logger.wandb_mode=disabled")
TRAIN_TINY = (
    "env.num_envs=4",
    "env.num_threads=1",
    "algorithm.num_steps=8",
    "algorithm.num_minibatches=2",
    "total_env_steps=64",
    "eval.num_episodes=2",
    "eval.video=false",
    *QUIET,
)
GYM_TINY = (
    "env.num_envs=2",
    "algorithm.num_steps=8",
    "algorithm.num_minibatches=2",
    "total_env_steps=32",
    "eval.num_episodes=2",
    "eval.video=false",
    *QUIET,
)
COLLECT_TINY = ("num_episodes=2", "env.num_envs=2")
SFT_TINY = (
    "steps=4",
    "batch_size=4",
    "checkpoint_interval=2",
    "env.num_envs=2",
    "eval.num_episodes=2",
    "eval.interval=0",
    *QUIET,
)
RL_TINY = (
    "iterations=1",
    "env.num_envs=4",
    "env.num_threads=1",
    "algorithm.num_decisions=2",
    "algorithm.num_minibatches=2",
    "eval.num_episodes=2",
    "eval.ood_splits=[]",
    "checkpoint_interval=1",
    "torch_num_threads=1",
    *QUIET,
)
RAY_TINY = (*TRAIN_TINY, "env.num_envs=8")
RAY_RANKS_TINY = (*RAY_TINY, "distributed.trainer_cpus=0")
"""Two env workers take this 2-core machine's two CPUs; ranks that also asked one each would be a
ConfigError before the run starts (the tutorial says so)."""
ASYNC_TINY = (*(o for o in RAY_TINY if not o.startswith("total_env_steps=")), "total_env_steps=256")
"""Four updates, each on one of the two rollout workers' rollouts."""
TRAINED = "evaluation ("
COVERED_BY_REHEARSAL = "the rehearsal above starts these three processes itself and runs in this test"

PLANS: dict[tuple[str, str], Run | Validate | NotRun] = {
    # Train PPO on a task
    ("train_ppo.md", "vla-rl train run_dir=runs/reach"): Run(TRAIN_TINY, TRAINED),
    (
        "train_ppo.md",
        "vla-rl eval --checkpoint runs/reach eval.num_episodes=128 eval.split=ood_position",
    ): Run(("eval.num_episodes=2", "eval.video=false"), "split ood_position"),
    (
        "train_ppo.md",
        "vla-rl train env=push run_dir=runs/push total_env_steps=20_000_000 max_minutes=30",
    ): Run(TRAIN_TINY, TRAINED),
    ("train_ppo.md", "vla-rl train --resume runs/push total_env_steps=30_000_000"): Run(
        ("total_env_steps=128",), "trained 4 iterations"
    ),
    (
        "train_ppo.md",
        "vla-rl train env=reach_pixels policy=cnn algorithm=ppo_pixels total_env_steps=614_400 "
        "run_dir=runs/reach_pixels",
    ): Run((*TRAIN_TINY, "env.num_envs=2", "total_env_steps=32"), TRAINED),
    # Bring a Gymnasium env
    ("gymnasium.md", "vla-rl train env.backend=gymnasium env.task=Reacher-v5 run_dir=runs/reacher"): Run(
        GYM_TINY, TRAINED
    ),
    ("gymnasium.md", "vla-rl train env.backend=gymnasium env.task=Pusher-v5 run_dir=runs/pusher"): Run(
        GYM_TINY, TRAINED
    ),
    ("gymnasium.md", "vla-rl eval --checkpoint runs/reacher eval.num_episodes=32"): Run(
        ("eval.num_episodes=2", "eval.video=false"), TRAINED
    ),
    # Demonstrations and SFT
    (
        "sft_vla.md",
        "vla-rl collect env=pick_place num_episodes=200 noise_std=0.2 output_dir=datasets/pick_place",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "sft_vla.md",
        "vla-rl sft sft/policy=pi0 data.path=datasets/pick_place data.action_key=expert_action "
        "data.boundary_repeats=8 env=pick_place env.cameras=[front] steps=16000 run_dir=runs/sft_pi0 "
        "policy.kwargs.proprio_dim=32 +policy.kwargs.state_keys=[proprio,objects] "
        "+policy.kwargs.proprio_fields=[arm_qpos,gripper_opening_m,tcp_pos,tcp_rot6]",
    ): Run(SFT_TINY, "trained 4 steps"),
    # RL fine-tuning with a recipe (from the SFT starts committed under benchmarks/starts/)
    (
        "rl_finetune.md",
        "vla-rl train recipe=pi0_flow_noise_ppo policy.init_from=benchmarks/starts/pi0_200_start5 "
        "run_dir=runs/rl_flow_noise",
    ): Run(RL_TINY, "before RL"),
    (
        "rl_finetune.md",
        "vla-rl train recipe=pi0_flow_sde_ppo policy.init_from=benchmarks/starts/pi0_200_start5 "
        "run_dir=runs/rl_flow_sde",
    ): Run(RL_TINY, "before RL"),
    (
        "rl_finetune.md",
        "vla-rl train recipe=token_vla_ppo policy.init_from=benchmarks/starts/token_vla_400_start6 "
        "run_dir=runs/rl_token_ppo",
    ): Run(RL_TINY, "before RL"),
    (
        "rl_finetune.md",
        "vla-rl train recipe=token_vla_grpo policy.init_from=benchmarks/starts/token_vla_400_start6 "
        "run_dir=runs/rl_token_grpo",
    ): Run((*RL_TINY, "algorithm.group_size=2"), "before RL"),
    # Learn a reward model
    (
        "reward_model.md",
        "vla-rl collect env=push env.cameras=[front] video.lossless=true num_episodes=100 "
        "output_dir=datasets/push_demos",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "reward_model.md",
        "vla-rl collect env=push env.cameras=[front] video.lossless=true keep_failures=true noise_std=3.0 "
        "num_episodes=100 output_dir=datasets/push_failures",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "reward_model.md",
        "vla-rl collect env=push env.cameras=[front] video.lossless=true keep_failures=true noise_std=1.0 "
        "num_episodes=20 seed=1 output_dir=datasets/push_heldout",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "reward_model.md",
        "vla-rl reward-train task=push datasets=[datasets/push_demos,datasets/push_failures] "
        "eval_datasets=[datasets/push_heldout] model.cameras=[front] output_dir=runs/reward_models/push",
    ): Run(("steps=2", "batch_size=8", "torch_num_threads=1"), "held-out (2 episodes"),
    (
        "reward_model.md",
        "vla-rl train env=push reward=learned reward.path=runs/reward_models/push env.cameras=[front] "
        "reward.cameras=[front] run_dir=runs/push_learned_reward",
    ): Run(TRAIN_TINY, TRAINED),
    # Scale out on Ray
    (
        "ray.md",
        "vla-rl train env=push distributed.runtime=ray distributed.env_workers=2 env.pipeline_stages=2 "
        "run_dir=runs/push_ray",
    ): Run(RAY_TINY, TRAINED, own_process=True),
    (
        "ray.md",
        "vla-rl train env=push distributed.runtime=ray distributed.env_workers=2 distributed.trainer_ranks=2 "
        "run_dir=runs/push_ranks",
    ): Run(RAY_RANKS_TINY, TRAINED, own_process=True),
    (
        "ray.md",
        "vla-rl train env=push distributed.runtime=ray distributed.rollout_workers=2 "
        "distributed.max_staleness=1 run_dir=runs/push_async",
    ): Run(ASYNC_TINY, TRAINED, own_process=True),
    ("ray.md", "ray start --head --port=6379"): NotRun(
        "Ray's own command: it leaves a cluster daemon running on the machine"
    ),
    ("ray.md", "ray start --address=<head-node-ip>:6379"): NotRun("Ray's own command, on another node"),
    (
        "ray.md",
        "vla-rl train env=push env.num_envs=1024 env.pipeline_stages=2 distributed.runtime=ray "
        "distributed.ray_address=auto distributed.env_workers=16 distributed.trainer_ranks=4 "
        "distributed.rendezvous_host=auto",
    ): Validate("needs a running Ray cluster (ray_address=auto); the two commands above run on a local Ray"),
    # Deploy over ROS 1 and ROS 2
    ("deploy_ros.md", "vla-rl train run_dir=runs/reach"): Run(TRAIN_TINY, TRAINED),
    ("deploy_ros.md", "make ros"): NotRun("installs system packages with apt-get; `make test` runs it"),
    (
        "deploy_ros.md",
        "python -m vla_rl.real_world.rehearsal --work-dir runs/rehearsal checkpoint=runs/reach episodes=20",
    ): Run(substitute=(("episodes=20", "episodes=2"),), expect='"episodes": 2', needs="roscore"),
    ("deploy_ros.md", "roscore"): NotRun(COVERED_BY_REHEARSAL),
    ("deploy_ros.md", "vla-rl sim-robot checkpoint=runs/reach"): NotRun(COVERED_BY_REHEARSAL),
    ("deploy_ros.md", "vla-rl deploy checkpoint=runs/reach episodes=20"): NotRun(COVERED_BY_REHEARSAL),
    (
        "deploy_ros.md",
        "unshare -n sh -c 'ip link set lo up && python -m vla_rl.real_world.rehearsal --work-dir "
        "runs/rehearsal2 robot.transport=ros2 checkpoint=runs/reach episodes=20'",
    ): Run(substitute=(("episodes=20", "episodes=2"),), expect='"episodes": 2', needs="namespace"),
    ("deploy_ros.md", "vla-rl deploy checkpoint=runs/reach robot.simulated=false max_steps=200"): Validate(
        "drives a real arm"
    ),
    (
        "deploy_ros.md",
        "vla-rl policy-server checkpoint=runs/reach policy.host=0.0.0.0 policy.token=SECRET",
    ): Validate("serves until stopped; tests/real_world/test_policy_server.py runs the server"),
    (
        "deploy_ros.md",
        "vla-rl deploy checkpoint=runs/reach policy.mode=remote policy.host=THAT_HOST policy.token=SECRET "
        "action_queue.enabled=true",
    ): Validate("needs the policy server on another machine and a robot"),
}
