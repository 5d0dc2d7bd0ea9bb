"""A run's workers ask Ray for CPUs; more than Ray has free is a ConfigError up front, not a run that
waits for ever (Ray queues an actor until its CPUs are free)."""

from __future__ import annotations

import pytest

from vla_rl.config.distributed import DistributedConfig
from vla_rl.config.structured import ConfigError
from vla_rl.distributed.layout import cpu_shortfall, make_training_runtime, requested_cpus


def test_requested_cpus_add_every_env_worker_and_trainer_rank() -> None:
    cfg = DistributedConfig(
        runtime="ray", env_workers=3, env_worker_cpus=0.5, trainer_ranks=2, trainer_cpus=1.0
    )
    assert requested_cpus(cfg) == 3 * 0.5 + 2 * 1.0  # 3.5
    assert requested_cpus(DistributedConfig(runtime="ray", env_workers=2, env_worker_cpus=0.0)) == 0.0


def test_workers_that_fit_the_free_cpus_pass_up_to_equality() -> None:
    cfg = DistributedConfig(runtime="ray", env_workers=2, trainer_ranks=2)  # 2 x 1 + 2 x 1 = 4 CPUs
    assert cpu_shortfall(cfg, available_cpus=4.0) is None
    assert cpu_shortfall(cfg, available_cpus=8.0) is None
    ranks_free = DistributedConfig(runtime="ray", env_workers=2, trainer_ranks=2, trainer_cpus=0.0)
    assert cpu_shortfall(ranks_free, available_cpus=2.0) is None


def test_a_shortfall_names_the_keys_and_the_counts() -> None:
    message = cpu_shortfall(
        DistributedConfig(runtime="ray", env_workers=2, trainer_ranks=2), available_cpus=2.0
    )
    assert message is not None
    assert message.startswith("config keys 'distributed.env_worker_cpus' and 'distributed.trainer_cpus'")
    assert "ask Ray for 4 CPUs" in message and "but 2 are free" in message
    assert "2 env workers x 1 (distributed.env_worker_cpus) + 2 trainer ranks x 1" in message


def test_a_shortfall_names_only_the_roles_that_ask_for_cpus() -> None:
    cfg = DistributedConfig(
        runtime="ray", env_workers=3, env_worker_cpus=1.5, trainer_ranks=2, trainer_cpus=0.0
    )
    message = cpu_shortfall(cfg, available_cpus=4.0)
    assert message is not None
    assert message.startswith("config key 'distributed.env_worker_cpus':")
    assert "trainer" not in message
    assert "ask Ray for 4.5 CPUs (3 env workers x 1.5 (distributed.env_worker_cpus))" in message


def test_the_in_process_runtime_has_no_cpu_check() -> None:
    cfg = DistributedConfig(runtime="inprocess", env_workers=64, env_worker_cpus=8.0)
    runtime = make_training_runtime(cfg)
    assert runtime is not None and runtime.available_cpus() is None


def test_ray_refuses_workers_that_ask_for_more_cpus_than_it_has(ray_runtime) -> None:
    """The session's Ray instance has 2 CPUs: two env workers and two ranks at one CPU each would
    wait for ever. The error comes before any worker is spawned, and leaves a Ray that this run did
    not start running."""
    assert ray_runtime.available_cpus() <= 2.0
    cfg = DistributedConfig(runtime="ray", env_workers=2, trainer_ranks=2)
    with pytest.raises(ConfigError, match=r"distributed.env_worker_cpus.*ask Ray for 4 CPUs"):
        make_training_runtime(cfg)
    assert ray_runtime.ray.is_initialized()
    runtime = make_training_runtime(DistributedConfig(runtime="ray", env_workers=2, env_worker_cpus=0.0))
    assert runtime is not None and runtime.available_cpus() == ray_runtime.available_cpus()


def test_the_config_knows_every_placement_mode_the_layout_plans() -> None:
    from vla_rl.config.distributed import PLACEMENT_MODES
    from vla_rl.distributed.layout import PLACEMENTS

    assert sorted(PLACEMENT_MODES) == sorted(["none", *PLACEMENTS])
