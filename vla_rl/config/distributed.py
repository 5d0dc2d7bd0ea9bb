"""Config of where a training run's workers run (the ``distributed`` group of a training config).

The schema of ``vla_rl.distributed`` lives here, below it, because ``TrainConfig`` (``vla-rl train``'s
state PPO) and ``VLARLConfig`` (``vla-rl train recipe=...``'s chunk RL) compose it."""

from __future__ import annotations

from dataclasses import dataclass, field

RUNTIMES = ("inprocess", "ray")
"""The values of ``distributed.runtime``."""
TRAINER_STRATEGIES = ("ddp", "fsdp2")
"""The values of ``distributed.trainer_strategy``."""
PLACEMENT_MODES = ("none", "collocated", "disaggregated", "hybrid")
"""The values of ``distributed.placement.mode`` (``vla_rl.distributed.layout.PLACEMENTS`` and ``none``)."""


@dataclass
class PlacementConfig:
    mode: str = "none"
    """``none`` (workers ask for CPUs only), ``collocated``, ``disaggregated`` or ``hybrid`` (see
    ``vla_rl.distributed.layout``)."""
    num_gpus: int = 1
    """GPUs used in all."""
    env_gpus: int = 1
    """GPUs of the env workers (``disaggregated``), or shared by env and inference (``hybrid``)."""
    inference_gpus: int = 1
    """GPUs of the inference workers (``disaggregated`` only)."""


@dataclass
class DistributedConfig:
    runtime: str = "inprocess"
    """``inprocess`` (the default; needs no Ray) or ``ray`` (workers are Ray actors)."""
    env_workers: int = 0
    """Env workers the worlds are spread over; 0 builds the env in the training process. Each worker
    holds ``env.pipeline_stages`` stages of ``env.num_envs / (env_workers * pipeline_stages)`` worlds.
    A worker that dies is replaced; the step its worlds never ran is left out of the update."""
    env_worker_cpus: float = 1.0
    """CPUs each env worker asks of Ray."""
    trainer_ranks: int = 0
    """Data-parallel trainer ranks that run the update (state PPO's with DDP; a chunk algorithm's,
    chunk PPO or GRPO, with each rank's gradients averaged over the group); 0 updates in the training
    process. More than one needs the Ray runtime (the ranks run at once). A rank that dies restarts
    the ranks from the run's last checkpoint."""
    trainer_strategy: str = "ddp"
    """How chunk RL's trainer ranks hold the policy: ``ddp``, a whole replica on each rank (the
    gradients averaged), or ``fsdp2``, each rank keeps 1/``trainer_ranks`` of every parameter, its
    gradient and its Adam state (``torch.distributed.fsdp.fully_shard`` on each transformer layer and
    on the whole policy), for policies whose update does not fit one GPU. The same steps either way;
    checkpoints are the same files. State PPO trains with ``ddp``."""
    rollout_workers: int = 0
    """Asynchronous PPO (state PPO only): this many rollout workers, each with its own env of
    ``env.num_envs`` worlds and a policy copy, collect while the learner updates; each update learns
    from one worker's rollout, so ``total_env_steps`` counts ``num_steps * num_envs`` per update as
    before. 0: synchronous PPO. Each asks for ``env_worker_cpus``; needs ``env_workers: 0`` and
    ``trainer_ranks: 0`` (see ``vla_rl.distributed.async_ppo``)."""
    max_staleness: int = 1
    """Asynchronous PPO: updates a rollout's weights may lag the learner's when it is learned from;
    staler rollouts are dropped (logged as ``async/dropped``). W rollout workers settle at W - 1."""
    trainer_cpus: float = 1.0
    """CPUs each trainer rank asks of Ray."""
    rendezvous_host: str = "127.0.0.1"
    """Address trainer rank 0 publishes to the others: loopback on one machine, ``auto`` (its node's
    address, from Ray) on a cluster."""
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    """GPU layout of the env workers and trainer ranks (Ray runtime); ``mode: none`` asks for CPUs only."""
    ray_address: str | None = None
    """``null`` starts a Ray instance on loopback (one machine); ``auto`` joins the cluster started
    with ``ray start`` on each node; or ``ray://host:10001``."""
