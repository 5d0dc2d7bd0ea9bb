"""The off-policy learner in the one loop on the toy env: job routing, config checks, symmetric
sampling, checkpoints with the replay buffer, and exact resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from toy_env import TOY_BACKEND

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.training.checkpoint import list_checkpoints
from vla_rl.training.jobs import job_config, train_job
from vla_rl.training.off_policy.trainer import INTERVENTIONS_FILENAME, REPLAY_FILENAME, OffPolicyTrainer

OFF_POLICY_TOY = [
    f"env.backend={TOY_BACKEND}",
    "env.task=point",
    "env.num_envs=2",
    "policy.obs_keys=[proprio,privileged]",
    "policy.hidden_sizes=[16,16]",
    "replay.batch_size=8",
    "replay.learning_starts=8",
    "eval.num_episodes=4",
    "eval.interval_env_steps=0",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
]


def _trainer(run_dir: Path, *extra: str, algorithm: str = "sac") -> OffPolicyTrainer:
    cfg = job_config("off_policy", [f"algorithm={algorithm}", *OFF_POLICY_TOY, f"run_dir={run_dir}", *extra])
    return OffPolicyTrainer(cfg)


def test_algorithm_sac_or_rlpd_picks_the_off_policy_job_and_rlpd_its_settings() -> None:
    assert train_job(["algorithm=sac"], None) == "off_policy"
    assert train_job(["algorithm=rlpd", "env=push"], None) == "off_policy"
    assert train_job(["algorithm=ppo"], None) == "ppo"
    rlpd = job_config("off_policy", ["algorithm=rlpd"]).algorithm
    assert (rlpd.num_critics, rlpd.critic_subset, rlpd.utd_ratio, rlpd.layer_norm) == (10, 2, 20, True)
    sac = job_config("off_policy", ["algorithm=sac"]).algorithm
    assert (sac.num_critics, sac.critic_subset, sac.utd_ratio, sac.layer_norm) == (2, 2, 1, False)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("replay.learning_starts=10", "replay.learning_starts"),  # below batch_size 256
        ("algorithm.critic_subset=3", "algorithm.critic_subset"),  # more than the 2 critics
        ("algorithm.tau=0", "algorithm.tau"),
        ("algorithm.bc_loss_type=l1", "algorithm.bc_loss_type"),
        ("demos.share=0.25 demos.interventions_as_demos=false", "demos.share"),  # nothing to share
        ("demos.intervention_capacity=0", "demos.intervention_capacity"),
    ],
)
def test_bad_settings_are_config_errors_naming_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        job_config("off_policy", ["algorithm=sac", *override.split(" ")])


def test_budget_counts_env_steps_with_the_random_warm_up_in_the_first_update(tmp_path: Path) -> None:
    # 8 random env steps (4 batched steps of 2 worlds) and one more batched step before update 1,
    # then one batched step per update: 8 + 2 + 2 k >= 20 after k = 5 more updates, 6 in all.
    trainer = _trainer(tmp_path, "total_env_steps=20", "checkpoint_interval=4")
    result = trainer.train()
    assert (result.iterations, result.env_steps, result.stop_reason) == (6, 20, "total_env_steps")
    assert result.history[0]["rollout/env_steps"] == 10 and result.history[1]["rollout/env_steps"] == 2
    assert len(trainer.replay) == 20
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["iter_000004", "iter_000006"]
    assert (tmp_path / "checkpoints" / "iter_000006" / REPLAY_FILENAME).is_file()
    assert {"train/critic_loss", "train/actor_loss", "train/alpha", "replay/transitions"} <= set(
        result.history[-1]
    )
    assert [steps for steps, _ in result.evaluations] == [20]


def test_resumed_run_makes_the_same_updates_as_an_uninterrupted_one(tmp_path: Path) -> None:
    straight = _trainer(tmp_path / "straight", "total_env_steps=30").train()
    first = _trainer(tmp_path / "split", "total_env_steps=16").train()
    resumed = _trainer(tmp_path / "split", "total_env_steps=30", f"resume={tmp_path / 'split'}")
    assert resumed.env_steps == 16 and len(resumed.replay) == 16
    second = resumed.train()

    def losses(history: list[dict[str, float]]) -> list[dict[str, float]]:
        return [{k: v for k, v in m.items() if k.startswith("train/")} for m in history]

    assert losses(first.history + second.history) == losses(straight.history)
    for a, b in zip(
        _trainer(tmp_path / "straight", f"resume={tmp_path / 'straight'}").policy.state_dict().values(),
        resumed.policy.state_dict().values(),
        strict=True,
    ):
        assert torch.equal(a, b)


def test_without_demonstrations_or_takeovers_pooling_them_changes_no_update(tmp_path: Path) -> None:
    # Nothing is flagged, so the intervention replay stays empty and every row is online, drawn as
    # when takeovers went into the online replay only.
    pooled = _trainer(tmp_path / "pooled", "total_env_steps=20")
    apart = _trainer(tmp_path / "apart", "total_env_steps=20", "demos.interventions_as_demos=false")
    assert pooled.interventions is not None and apart.interventions is None
    first, second = pooled.train(), apart.train()

    def losses(history: list[dict[str, float]]) -> list[dict[str, float]]:
        return [{k: v for k, v in m.items() if k.startswith("train/")} for m in history]

    assert len(first.history) == 6 and losses(first.history) == losses(second.history)
    assert [m["replay/intervention_transitions"] for m in first.history] == [0.0] * 6
    for a, b in zip(pooled.policy.state_dict().values(), apart.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert (tmp_path / "pooled" / "checkpoints" / "iter_000006" / INTERVENTIONS_FILENAME).is_file()
    assert not (tmp_path / "apart" / "checkpoints" / "iter_000006" / INTERVENTIONS_FILENAME).exists()


def test_takeovers_a_local_env_reports_join_the_demonstration_share(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, "demos.share=0.25", "algorithm.utd_ratio=2")
    env_step = trainer.env.step

    def step_taking_over_world_1(action: torch.Tensor):  # noqa: ANN202
        result = env_step(action)
        result.info["intervention"] = torch.tensor([False, True])
        return result

    trainer.env.step = step_taking_over_world_1  # type: ignore[method-assign]
    batches, _ = trainer.source.next_batch()  # 5 batched steps: 10 online, 5 of world 1 taken over
    assert len(trainer.replay) == 10 and trainer.interventions is not None and len(trainer.interventions) == 5
    held = trainer.interventions.gather(trainer.interventions.valid_slots())
    online = trainer.replay.gather(trainer.replay.valid_slots())
    assert torch.equal(held.action, online.action[1::2]) and torch.equal(held.reward, online.reward[1::2])
    for batch in batches:  # 0.25 of 8 rows from the pool (the takeovers alone), 6 online
        assert batch.intervention[:2].all() and len(batch) == 8


def _demo(length: int, success: bool) -> Episode:
    steps = np.arange(length, dtype=np.float32)[:, None]
    return Episode(
        images={},
        proprio=np.repeat(steps, 2, axis=1),
        actions=np.full((length, 2), 0.5, dtype=np.float32),
        instruction="reach the point",
        success=success,
        rewards=-np.ones(length, dtype=np.float32),
        privileged=np.repeat(steps, 2, axis=1),
    )


def test_rlpd_minibatches_draw_the_demo_share_from_the_demonstrations(tmp_path: Path, monkeypatch) -> None:
    import vla_rl.training.off_policy.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "load_demonstrations", lambda path, count: [_demo(6, True)] * 3)
    trainer = _trainer(
        tmp_path, "demos.path=unused", "demos.share=0.25", "algorithm.utd_ratio=3", algorithm="rlpd"
    )
    batches, metrics = trainer.source.next_batch()
    assert len(batches) == 3 and metrics["rollout/env_steps"] == 10
    for batch in batches:
        # 0.25 of 8 rows: the first 2 from the demonstrations (actions 0.5, reward -1), 6 online
        assert len(batch) == 8
        assert torch.all(batch.action[:2] == 0.5) and torch.all(batch.reward[:2] == -1.0)
    assert trainer.algorithm.update(batches)["critic_loss"] > 0


# --- from pixels ------------------------------------------------------------------------------------------

SMALL_PIXEL_LEARNER = [
    "policy.cnn_channels=[4,4]",
    "policy.cnn_kernel_stride=[[3,2],[3,1]]",  # 16x16 images leave 5x5
    "policy.cnn_feature_dim=8",
    "replay.capacity=200",
    "algorithm.num_critics=3",
    "algorithm.utd_ratio=2",
]
PIXELS_TOY = ["observations=pixels", "env.cameras=[front,wrist]", "env.image_size=16", *SMALL_PIXEL_LEARNER]
TOY_WITHOUT_KEYS = [override for override in OFF_POLICY_TOY if not override.startswith("policy.obs_keys=")]


def test_pixel_rlpd_keeps_uint8_frames_and_resumes_exactly(tmp_path: Path) -> None:
    def pixel_trainer(run_dir: Path, *extra: str) -> OffPolicyTrainer:
        # A resumed run reads its settings from its saved config.yaml, the group choices included.
        resume = [override for override in extra if override.startswith("resume=")]
        settings = [] if resume else ["algorithm=rlpd", *TOY_WITHOUT_KEYS, *PIXELS_TOY]
        cfg = job_config("off_policy", [*settings, f"run_dir={run_dir}", *extra])
        assert cfg.policy.obs_keys == ["rgb_front", "rgb_wrist", "proprio"]
        assert cfg.algorithm.image_shift_px == 4
        return OffPolicyTrainer(cfg)

    straight = pixel_trainer(tmp_path / "straight", "total_env_steps=20")
    assert straight.algorithm.encode is straight.policy.encoder  # the critic loss trains it
    straight_result = straight.train()
    assert straight_result.iterations == 6
    assert {key: frames.dtype for key, frames in straight.replay.frames.items()} == {
        "rgb_front": torch.uint8,
        "rgb_wrist": torch.uint8,
        "proprio": torch.float32,
    }
    saved = ReplayBuffer.load(tmp_path / "straight" / "checkpoints" / "iter_000006" / REPLAY_FILENAME)
    front = saved.frames["rgb_front"]
    assert front.dtype == torch.uint8 and front.shape[1:] == (16, 16, 3)

    first = pixel_trainer(tmp_path / "split", "total_env_steps=12").train()
    resumed = pixel_trainer(tmp_path / "split", "total_env_steps=20", f"resume={tmp_path / 'split'}")
    second = resumed.train()

    def losses(history: list[dict[str, float]]) -> list[dict[str, float]]:
        return [{k: v for k, v in m.items() if k.startswith("train/")} for m in history]

    assert losses(first.history + second.history) == losses(straight_result.history)
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(resumed.policy.state_dict()[key], value), key
    assert any(key.startswith("encoder.convs") for key in resumed.policy.state_dict())


def test_collected_push_camera_demos_load_as_uint8_transitions_of_the_policy_keys(tmp_path: Path) -> None:
    from vla_rl.data.collect import collect_demonstrations
    from vla_rl.data.config import compose_collect_config
    from vla_rl.data.lerobot_format import open_dataset

    camera_settings = ["env.cameras=[front,wrist]", "env.image_size=16", "env.max_episode_steps=10"]
    demos = tmp_path / "demos"
    collect_demonstrations(
        compose_collect_config(
            ["env=push", "env.num_envs=2", *camera_settings, "num_episodes=2", "keep_failures=true"]
            + ["video.lossless=true", f"output_dir={demos}"]
        )
    )
    cfg = job_config(
        "off_policy",
        ["algorithm=rlpd", "env=push", "env.num_envs=2", *camera_settings, *SMALL_PIXEL_LEARNER]
        + ["observations=pixels", f"demos.path={demos}", "replay.batch_size=8", "replay.learning_starts=8"]
        + ["total_env_steps=10", "eval.num_episodes=0", "logger.progress_bar=false"]
        + ["logger.tensorboard=false", "logger.wandb_mode=disabled", f"run_dir={tmp_path / 'run'}"],
    )
    trainer = OffPolicyTrainer(cfg)
    replay = trainer.source.sampler.demos
    assert replay is not None and len(replay) == 2 * 9  # each drops its last action (a time-limit end)
    assert {key: frames.dtype for key, frames in replay.frames.items()} == {
        "rgb_front": torch.uint8,
        "rgb_wrist": torch.uint8,
        "proprio": torch.float32,
    }
    first = replay.gather(replay.valid_slots()[:1])
    episode = next(iter(open_dataset(demos).episodes()))
    for camera in ("front", "wrist"):
        assert np.array_equal(first.obs[f"rgb_{camera}"][0].numpy(), episode.images[camera][0])
        assert np.array_equal(first.next_obs[f"rgb_{camera}"][0].numpy(), episode.images[camera][1])
    result = trainer.train()
    assert result.iterations == 1 and trainer.replay.frames["rgb_wrist"].dtype == torch.uint8


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("env.cameras=[front]", "policy.obs_keys"),  # rgb_wrist without its camera
        ("policy.cnn_kernel_stride=[[3,2]]", "policy.cnn_kernel_stride"),  # 1 pair for 4 convolutions
        ("env.image_size=8", "policy.cnn_kernel_stride"),  # 8 -> 3 -> 1, no room for the third 3x3
        ("policy.cnn_feature_dim=0", "policy.cnn_feature_dim"),
        ("algorithm.image_shift_px=-1", "algorithm.image_shift_px"),
    ],
)
def test_bad_pixel_settings_are_config_errors_naming_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"config key '{key}"):
        job_config("off_policy", ["algorithm=rlpd", "observations=pixels", override])


def test_the_run_seed_seeds_sac_noise_and_the_image_shifts(tmp_path: Path) -> None:
    from vla_rl.algorithms.sac import SHIFT_SEED

    def states(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        algorithm = _trainer(tmp_path / f"seed{seed}", f"seed={seed}").algorithm
        return algorithm.generator.get_state(), algorithm.shift_generator.get_state()

    zero, one = states(0), states(1)
    assert torch.equal(zero[0], torch.Generator().manual_seed(0).get_state())
    assert torch.equal(zero[1], torch.Generator().manual_seed(SHIFT_SEED).get_state())
    assert torch.equal(one[0], torch.Generator().manual_seed(1).get_state())
    assert torch.equal(one[1], torch.Generator().manual_seed(1 + SHIFT_SEED).get_state())


def test_a_finished_run_loads_back_as_its_last_networks(tmp_path: Path) -> None:
    from vla_rl.training.off_policy.networks import load_off_policy_run

    trainer = _trainer(tmp_path, "total_env_steps=20")
    trainer.train()
    loaded, wrap = load_off_policy_run(tmp_path)
    trained = trainer.policy.state_dict()
    assert loaded.state_dict().keys() == trained.keys()
    assert all(torch.equal(value, trained[key]) for key, value in loaded.state_dict().items())
    assert not loaded.training
    assert wrap(trainer.env) is trainer.env  # no frozen policy: the env itself
