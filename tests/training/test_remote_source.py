"""The remote learner's side without the network: what a transitions message must look like, the
inbox's resends, the update-to-data accounting, and exact resume of a learner fed from its inbox."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from toy_env import TOY_BACKEND

from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.training.jobs import job_config
from vla_rl.training.off_policy.config import ReplayConfig
from vla_rl.training.off_policy.demo_sampler import intervention_replay
from vla_rl.training.off_policy.remote_link import TransitionInbox, TransitionRows, TransitionSpec
from vla_rl.training.off_policy.remote_source import RemoteSource
from vla_rl.training.off_policy.trainer import INTERVENTIONS_FILENAME, OffPolicyTrainer

SPEC = TransitionSpec({"proprio": (3,), "privileged": (2,)}, action_dim=2, worlds=2)


def message(steps: int, start: float = 0.0, spec: TransitionSpec = SPEC) -> dict:
    """``steps`` batched steps whose every value is distinct and starts at ``start``."""
    rows = steps * spec.worlds
    counter = iter(np.arange(start, start + 10_000, dtype=np.float32))

    def values(*shape: int) -> np.ndarray:
        return np.array([next(counter) for _ in range(int(np.prod(shape)))], dtype=np.float32).reshape(shape)

    return {
        "obs": {key: values(rows, *shape) for key, shape in spec.obs_shapes.items()},
        "next_obs": {key: values(rows, *shape) for key, shape in spec.obs_shapes.items()},
        "action": values(rows, spec.action_dim),
        "reward": values(rows),
        "terminated": np.arange(rows) % 3 == 0,
        "truncated": np.arange(rows) % 4 == 1,
        "intervention": np.arange(rows) % 5 == 2,
    }


def source(
    learning_starts: int = 4, env_steps_per_update: int = 1, utd_ratio: int = 2, pool_takeovers: bool = False
) -> RemoteSource:
    cfg = ReplayConfig(capacity=100, batch_size=4, learning_starts=learning_starts)
    cfg.env_steps_per_update = env_steps_per_update
    replay = ReplayBuffer(cfg.capacity, SPEC.worlds, obs_keys=list(SPEC.obs_shapes))
    interventions = intervention_replay(50, "cpu", list(SPEC.obs_shapes)) if pool_takeovers else None
    weights = torch.nn.Linear(2, 2)
    return RemoteSource(SPEC, replay, cfg, utd_ratio, seed=0, weights=weights, interventions=interventions)


def test_a_good_message_passes_and_each_fault_is_named() -> None:
    rows = SPEC.check(message(3))
    assert len(rows) == 6 and rows.obs["proprio"].shape == (6, 3)
    faults = {
        "is not a positive multiple": lambda m: m.update(reward=m["reward"][:5]),
        "'action' has shape": lambda m: m.update(action=m["action"][:, :1]),
        "'action' must be a float32": lambda m: m.update(action=m["action"].astype(np.float64)),
        "'terminated' must be a bool": lambda m: m.update(terminated=m["terminated"].astype(np.uint8)),
        "'next_obs' has keys": lambda m: m["next_obs"].pop("privileged"),
        "'obs.proprio' has shape": lambda m: m["obs"].update(proprio=m["obs"]["proprio"][:, :2]),
        "non-finite": lambda m: m["reward"].__setitem__(0, np.nan),
        "has fields": lambda m: m.pop("intervention"),
    }
    for match, spoil in faults.items():
        bad = message(3)
        spoil(bad)
        with pytest.raises(ValueError, match=match):
            SPEC.check(bad)
    with pytest.raises(ValueError, match="must be a map"):
        SPEC.check([1, 2])


def test_camera_frames_travel_as_uint8_and_go_into_the_replay_as_they_came() -> None:
    spec = TransitionSpec({"rgb_front": (4, 5, 3), "proprio": (3,)}, action_dim=2, worlds=1)
    good = message(2, spec=spec)
    for name in ("obs", "next_obs"):
        good[name]["rgb_front"] = (good[name]["rgb_front"] % 256).astype(np.uint8)
    rows = spec.check(good)
    assert rows.obs["rgb_front"].dtype == np.uint8 and rows.obs["proprio"].dtype == np.float32
    replay = ReplayBuffer(10, 1, obs_keys=list(spec.obs_shapes))
    sink = RemoteSource(spec, replay, ReplayConfig(10, 2, 1), 1, seed=0, weights=torch.nn.Linear(1, 1))
    sink.link.inbox.put("actor", 0, rows)
    assert sink.drain() == 2
    stored = replay.gather(replay.valid_slots())
    np.testing.assert_array_equal(stored.obs["rgb_front"].numpy(), good["obs"]["rgb_front"])
    np.testing.assert_array_equal(stored.next_obs["rgb_front"].numpy(), good["next_obs"]["rgb_front"])
    floats = message(2, spec=spec)  # images as float32: refused, not cast
    with pytest.raises(ValueError, match="'obs.rgb_front' must be a uint8 array, got float32"):
        spec.check(floats)


def test_the_inbox_drops_a_resend_per_actor_and_forgets_what_a_resume_lost() -> None:
    inbox, rows = TransitionInbox(), SPEC.check(message(1))
    assert inbox.put("a", 0, rows) and inbox.put("b", 0, rows) and inbox.put("a", 1, rows)
    assert not inbox.put("a", 1, rows) and not inbox.put("a", 0, rows)
    assert [(e.actor_id, e.seq) for e in inbox.drain()] == [("a", 0), ("b", 0), ("a", 1)]
    assert inbox.drain() == []
    inbox.restore({"a": 0})  # the checkpoint had taken only a's message 0
    assert inbox.put("a", 1, rows) and not inbox.put("a", 0, rows) and inbox.put("b", 0, rows)


def test_transitions_go_into_the_replay_exactly_in_arrival_order() -> None:
    src = source()
    sent = [message(2, 0.0), message(1, 5_000.0)]
    for seq, m in enumerate(sent):
        assert src.link.inbox.put("actor", seq, SPEC.check(m))
    assert src.drain() == 6 and src.env_steps == 6 and src.actor_seqs == {"actor": 1}
    stored = src.replay.gather(src.replay.valid_slots())

    def joined(field: str) -> np.ndarray:
        return np.concatenate([m[field] for m in sent])

    for key in SPEC.obs_shapes:
        np.testing.assert_array_equal(stored.obs[key].numpy(), np.concatenate([m["obs"][key] for m in sent]))
        np.testing.assert_array_equal(
            stored.next_obs[key].numpy(), np.concatenate([m["next_obs"][key] for m in sent])
        )
    for field in ("action", "reward", "terminated", "truncated", "intervention"):
        np.testing.assert_array_equal(getattr(stored, field).numpy(), joined(field))


def test_taken_over_transitions_also_go_into_the_intervention_replay_and_into_the_share() -> None:
    src = source(pool_takeovers=True)
    sent = message(3)  # of rows 0 to 5, row 2 alone is flagged (row % 5 == 2)
    assert sent["intervention"].tolist() == [False, False, True, False, False, False]
    src.link.inbox.put("actor", 0, SPEC.check(sent))
    assert src.drain() == 6 and len(src.replay) == 6
    interventions = src.sampler.interventions
    assert interventions is not None and len(interventions) == 1
    held = interventions.gather(interventions.valid_slots())
    for key in SPEC.obs_shapes:
        np.testing.assert_array_equal(held.obs[key].numpy(), sent["obs"][key][2:3])
        np.testing.assert_array_equal(held.next_obs[key].numpy(), sent["next_obs"][key][2:3])
    np.testing.assert_array_equal(held.action.numpy(), sent["action"][2:3])
    assert held.reward.tolist() == [sent["reward"][2]] and held.terminated.tolist() == [sent["terminated"][2]]
    batches, _ = src.next_batch()  # half of 4 rows from the pool: the one takeover twice
    for batch in batches:
        assert batch.reward[:2].tolist() == [sent["reward"][2]] * 2 and batch.intervention[:2].all()


def test_an_update_waits_for_its_data_and_the_ratio_holds_however_it_arrives() -> None:
    src = source(learning_starts=4, env_steps_per_update=1)  # 2 rows per update after 4
    src.link.inbox.put("a", 0, SPEC.check(message(2)))  # 4 rows: the warm-up only
    assert not src.wait_for_data(lambda: True) and src.env_steps == 4
    src.link.inbox.put("a", 1, SPEC.check(message(5)))  # 10 more rows: 5 updates' worth at once
    updates = 0
    while src.wait_for_data(lambda: True):
        batches, metrics = src.next_batch()
        assert len(batches) == 2 and all(len(b) == 4 for b in batches)
        updates += 1
    assert updates == 5 and src.used_steps == src.env_steps == 14
    src.link.inbox.put("a", 2, SPEC.check(message(1)))  # one more step: one more update
    assert src.wait_for_data(lambda: True) and src.next_batch()[1]["rollout/env_steps"] == 2


def test_a_published_version_reaches_the_link_every_interval() -> None:
    src = source()
    src.publish_interval_updates = 3
    for version in range(7):
        src.publish(version)
    latest = src.link.weights.latest()
    assert latest is not None and latest.version == 6 and set(latest.state) == {"weight", "bias"}


TOY_REMOTE = [
    "algorithm=sac",
    f"env.backend={TOY_BACKEND}",
    "env.task=point",
    "env.num_envs=2",
    "policy.obs_keys=[proprio,privileged]",
    "policy.hidden_sizes=[16,16]",
    "replay.batch_size=8",
    "replay.learning_starts=8",
    "eval.num_episodes=0",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "source=remote",
]


def _remote_trainer(run_dir: Path, *extra: str) -> OffPolicyTrainer:
    return OffPolicyTrainer(job_config("off_policy", [*TOY_REMOTE, f"run_dir={run_dir}", *extra]))


def _toy_messages(trainer: OffPolicyTrainer, steps: int, takeovers: bool = False) -> list[TransitionRows]:
    """``steps`` batched steps of the toy env with random actions, one message each; with
    ``takeovers``, world 1 of every third step is flagged as taken over."""
    env, keys = trainer.env, trainer.cfg.policy.obs_keys
    generator = torch.Generator().manual_seed(1)
    obs, _ = env.reset(seed=1)
    out = []
    for step in range(steps):
        action = torch.rand((env.num_envs, 2), generator=generator) * 2 - 1
        result = env.step(action)
        final = result.info.get("final_obs", result.obs)
        out.append(
            trainer.source.link.spec.check(
                {
                    "obs": {k: obs[k].numpy().astype(np.float32) for k in keys},
                    "next_obs": {k: final[k].numpy().astype(np.float32) for k in keys},
                    "action": action.numpy(),
                    "reward": result.reward.numpy().astype(np.float32),
                    "terminated": result.terminated.numpy(),
                    "truncated": result.truncated.numpy(),
                    "intervention": (np.arange(env.num_envs) == 1) & (takeovers and step % 3 == 0),
                }
            )
        )
        obs = result.obs
    return out


@pytest.mark.parametrize("takeovers", [False, True])
def test_a_remote_learner_resumes_exactly_from_its_checkpoint(tmp_path: Path, takeovers: bool) -> None:
    # The updates depend on what has arrived, so both runs get the same data in the same two parts:
    # 16 transitions, a stop, then 14 more; one stays in memory, the other resumes its checkpoint.
    # With takeovers, the pool holds 3 of them at the stop and 5 at the end.
    straight = _remote_trainer(tmp_path / "straight", "total_env_steps=16")
    data = _toy_messages(straight, 15, takeovers)
    for seq, rows in enumerate(data[:8]):
        straight.source.link.inbox.put("actor", seq, rows)
    whole = straight.train().history
    straight.cfg.total_env_steps = 30
    for seq, rows in enumerate(data):
        straight.source.link.inbox.put("actor", seq, rows)
    whole += straight.train().history
    assert len(whole) == 11  # (30 - 8 warm-up) / 2 per update

    first = _remote_trainer(tmp_path / "split", "total_env_steps=16")
    for seq, rows in enumerate(data[:8]):
        first.source.link.inbox.put("actor", seq, rows)
    part = first.train()
    resumed = _remote_trainer(tmp_path / "split", "total_env_steps=30", f"resume={tmp_path / 'split'}")
    assert resumed.env_steps == 16 and len(resumed.replay) == 16 and resumed.source.actor_seqs == {"actor": 7}
    assert first.interventions is not None and resumed.interventions is not None
    assert len(resumed.interventions) == len(first.interventions) == (3 if takeovers else 0)
    assert (tmp_path / "split" / "checkpoints" / "iter_000004" / INTERVENTIONS_FILENAME).is_file()
    for name, value in first.interventions.state_dict().items():
        restored = resumed.interventions.state_dict()[name]
        if isinstance(value, dict):
            assert value.keys() == restored.keys() and all(torch.equal(value[k], restored[k]) for k in value)
        else:
            assert torch.equal(value, restored) if isinstance(value, torch.Tensor) else value == restored
    for seq, rows in enumerate(data):  # a resend of what the checkpoint holds is dropped
        resumed.source.link.inbox.put("actor", seq, rows)
    rest = resumed.train()

    def losses(history: list[dict[str, float]]) -> list[dict[str, float]]:
        return [{k: v for k, v in m.items() if k.startswith("train/")} for m in history]

    assert losses(part.history + rest.history) == losses(whole)
    assert len(resumed.replay) == len(straight.replay) == 30
    assert straight.interventions is not None and resumed.interventions is not None
    assert len(resumed.interventions) == len(straight.interventions) == (5 if takeovers else 0)
    for a, b in zip(straight.policy.state_dict().values(), resumed.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_a_remote_learner_without_data_makes_no_update_and_stops_when_asked(tmp_path: Path) -> None:
    import threading

    trainer = _remote_trainer(tmp_path, "total_env_steps=100")
    threading.Timer(0.5, trainer.request_stop).start()
    result = trainer.train()
    assert (result.iterations, result.stop_reason) == (0, "interrupted")
    published = trainer.source.link.weights.latest()
    assert published is not None and published.version == 0  # the actors could start meanwhile
