"""The isaaclab backend's adapter logic, run against a FAKE Isaac Lab env.

Isaac Sim cannot run here (no GPU, Python 3.11), so ``FakeManagerEnv`` / ``FakeDirectEnv`` below stand
in for Isaac Lab's ``ManagerBasedRLEnv`` / ``DirectRLEnv``. They follow Isaac Lab's documented
interface only: obs dict of groups (``"policy"`` tensor, ``"critic"`` dict of terms), ``step`` returning
(obs, reward, terminated, time_outs, extras) after resetting finished worlds itself through
``_reset_idx``, ``extras["final_obs"]`` when ``cfg.compute_final_obs`` is set, a termination manager
with ``active_terms`` / ``get_term`` / ``get_term_cfg``, camera sensors at
``scene.sensors[name].data.output["rgb"]`` (float images here) and ``seed`` seeding torch's global RNG.
Their physics is one line: position ``x += 0.25 * action``; the goal is ``x[0] >= 0.5``, dropping
``x[1] <= -0.75``, the reward ``x[0]``. Every expected number below follows from that by hand.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from vla_rl.sims.batching import unit_to_env_action
from vla_rl.sims.isaaclab.batched_env import IsaacLabBatchedEnv
from vla_rl.sims.isaaclab.conversions import rgb_uint8
from vla_rl.sims.isaaclab.settings import settings_from_config

from vla_rl.envs.config import EnvConfig

LIFT = "Isaac-Lift-Cube-Franka-v0"
CABINET = "Isaac-Franka-Cabinet-Direct-v0"


class FakeCamera:
    """Grey level (x[0] + 1) / 2 in [0, 1], as a float [N, 2, 2, 3] image of the current state."""

    def __init__(self, env: FakeDirectEnv) -> None:
        self._env = env

    @property
    def data(self) -> SimpleNamespace:
        grey = ((self._env.x[:, 0] + 1) / 2).clamp(0, 1)
        return SimpleNamespace(output={"rgb": grey[:, None, None, None].expand(-1, 2, 2, 3).clone()})


class FakeDirectEnv:
    """FAKE of Isaac Lab's DirectRLEnv interface (see the module docstring)."""

    ACTION_SCALE = 0.25

    def __init__(
        self, num_envs: int = 3, episode_steps: int = 4, compute_final_obs: bool | None = True
    ) -> None:
        self.cfg = SimpleNamespace(num_rerenders_on_reset=0)
        if compute_final_obs is not None:
            self.cfg.compute_final_obs = compute_final_obs
        self.num_envs, self.device, self.step_dt, self.max_episode_length = (
            num_envs,
            "cpu",
            0.02,
            episode_steps,
        )
        self.single_action_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.x = torch.zeros(num_envs, 2)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.extras: dict = {}
        self.scene = SimpleNamespace(sensors={"front": FakeCamera(self)}, write_data_to_sim=lambda: None)
        self.sim = SimpleNamespace(forward=lambda: None, render=lambda: None)
        self.seeds: list[int] = []
        self.last_action: torch.Tensor | None = None
        self.closed = False

    def seed(self, seed: int) -> int:
        torch.manual_seed(seed)
        self.seeds.append(seed)
        return seed

    def _reset_idx(self, env_ids) -> None:
        ids = torch.as_tensor(env_ids).long()
        self.x[ids] = torch.rand(len(ids), 2) - 0.5
        self.episode_length_buf[ids] = 0

    def _get_observations(self) -> dict:
        policy = torch.cat([self.x, self.episode_length_buf[:, None].float()], dim=-1)
        return {"policy": policy, "critic": {"doubled": 2 * self.x}}

    def _dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[:, 0] >= 0.5, self.episode_length_buf >= self.max_episode_length

    def step(self, action: torch.Tensor):
        self.last_action = action.clone()
        self.x += self.ACTION_SCALE * action
        self.episode_length_buf += 1
        terminated, time_outs = self._dones()
        reward = self.x[:, 0].clone()
        finished = (terminated | time_outs).nonzero().squeeze(-1)
        if len(finished):
            if getattr(self.cfg, "compute_final_obs", False):
                self.extras["final_obs"] = self._get_observations()
            self._reset_idx(finished)
        return self._get_observations(), reward, terminated, time_outs, self.extras

    def close(self) -> None:
        self.closed = True


class FakeTerminationManager:
    """FAKE of Isaac Lab's TerminationManager: a time out, a success and a failure term."""

    def __init__(self, env: FakeManagerEnv) -> None:
        self._env = env
        self._time_out = {"time_out": True, "object_reached_goal": False, "object_dropping": False}
        self._values = {name: torch.zeros(env.num_envs, dtype=torch.bool) for name in self._time_out}

    @property
    def active_terms(self) -> list[str]:
        return list(self._time_out)

    def compute(self) -> tuple[torch.Tensor, torch.Tensor]:
        env = self._env
        self._values = {
            "time_out": env.episode_length_buf >= env.max_episode_length,
            "object_reached_goal": env.x[:, 0] >= 0.5,
            "object_dropping": env.x[:, 1] <= -0.75,
        }
        terminated = self._values["object_reached_goal"] | self._values["object_dropping"]
        return terminated, self._values["time_out"]

    def get_term(self, name: str) -> torch.Tensor:
        return self._values[name]

    def get_term_cfg(self, name: str) -> SimpleNamespace:
        return SimpleNamespace(time_out=self._time_out[name])


class FakeManagerEnv(FakeDirectEnv):
    """FAKE of Isaac Lab's ManagerBasedRLEnv interface: managers and ``reset(seed, env_ids)``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.termination_manager = FakeTerminationManager(self)
        self.observation_manager = SimpleNamespace(compute=self._get_observations)

    def _dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.termination_manager.compute()

    def reset(self, seed=None, env_ids=None, options=None):
        if seed is not None:
            self.seed(seed)
        self._reset_idx(torch.arange(self.num_envs) if env_ids is None else env_ids)
        return self._get_observations(), self.extras


def make(env, task: str = LIFT, cameras: tuple[str, ...] = (), **options) -> IsaacLabBatchedEnv:
    cfg = EnvConfig(
        backend="isaaclab", task=task, num_envs=env.num_envs, cameras=list(cameras), options=options
    )
    return IsaacLabBatchedEnv(env, settings_from_config(cfg))


def step_to_goal_and_drop(adapter: IsaacLabBatchedEnv, env: FakeDirectEnv):
    """World 0 reaches the goal (x0 0.4 -> 0.525), world 2 drops (x1 -0.7 -> -0.825), world 1 stays."""
    env.x[:] = torch.tensor([[0.4, 0.0], [0.0, 0.0], [0.0, -0.7]])
    env.episode_length_buf.zero_()
    return adapter.step(torch.tensor([[0.5, 0.0], [0.0, 0.0], [0.0, -0.5]]))


def test_observation_mapping_spaces_and_instruction():
    env = FakeManagerEnv()
    adapter = make(env, cameras=("front",))
    obs, _ = adapter.reset()
    assert set(obs) == {"proprio", "privileged", "rgb_front", "instruction"} == set(adapter.observation_space)
    assert obs["proprio"].shape == (3, 3) and obs["privileged"].shape == (3, 2)
    torch.testing.assert_close(obs["privileged"], 2 * obs["proprio"][:, :2])
    assert obs["rgb_front"].dtype == torch.uint8 and obs["rgb_front"].shape == (3, 2, 2, 3)
    assert obs["instruction"] == ["lift the cube to the target position"] * 3
    assert adapter.max_episode_steps == 4 and adapter.control_hz == pytest.approx(50.0)
    assert adapter.action_space.shape == (2,) and float(adapter.action_space.high[0]) == 1.0


@pytest.mark.parametrize("native", [True, None], ids=["compute_final_obs", "no_flag_capture_before_reset"])
def test_final_observation_success_and_terminated_split(native):
    env = FakeManagerEnv(compute_final_obs=native)
    adapter = make(env, cameras=("front",))
    adapter.reset(seed=0)
    result = step_to_goal_and_drop(adapter, env)

    assert result.terminated.tolist() == [True, False, True]
    assert result.truncated.tolist() == [False, False, False]
    assert result.info["success"].tolist() == [True, False, False]
    final = result.info["final_obs"]
    torch.testing.assert_close(final["proprio"][0], torch.tensor([0.525, 0.0, 1.0]))
    torch.testing.assert_close(final["proprio"][2], torch.tensor([0.0, -0.825, 1.0]))
    torch.testing.assert_close(final["privileged"][0], torch.tensor([1.05, 0.0]))
    # grey (0.525 + 1) / 2 = 0.7625 -> 194.44 -> 194 before the reset; world 1 keeps (0 + 1) / 2 -> 128
    assert final["rgb_front"][0].unique().tolist() == [194]
    assert torch.equal(final["rgb_front"][1], result.obs["rgb_front"][1])
    assert final["rgb_front"][1].unique().tolist() == [128]
    torch.testing.assert_close(final["proprio"][1], result.obs["proprio"][1])
    assert result.obs["proprio"][0, 2] == 0 and result.obs["proprio"][0, 0] < 0.5, "obs is the new episode's"
    episode = result.info["episode"]
    torch.testing.assert_close(episode["return"], torch.tensor([0.525, 0.0, 0.0]))
    assert episode["length"].tolist() == [1, 1, 1] and episode["success_once"].tolist() == [
        True,
        False,
        False,
    ]
    assert "final_obs" not in env.extras, "a consumed final observation must not reach the next step"


def test_time_out_truncates_unless_the_world_also_terminates():
    env = FakeManagerEnv(episode_steps=2)
    adapter = make(env)
    adapter.reset(seed=1)
    env.x[:] = torch.tensor([[0.3, 0.0], [0.0, 0.0], [0.0, 0.0]])
    first = adapter.step(torch.zeros(3, 2))
    assert not first.done.any() and "episode" not in first.info
    second = adapter.step(torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))  # x0: 0.3 + 0.25 = 0.55
    assert second.terminated.tolist() == [True, False, False]
    assert second.truncated.tolist() == [False, True, True]
    assert second.info["success"].tolist() == [True, False, False]
    assert second.info["episode"]["length"].tolist() == [2, 2, 2]
    torch.testing.assert_close(second.info["final_obs"]["proprio"][1], torch.tensor([0.0, 0.0, 2.0]))


def test_actions_are_clipped_and_scaled_by_action_bound():
    env = FakeManagerEnv()
    adapter = make(env, action_bound=2.0)
    adapter.reset()
    adapter.step(torch.tensor([[0.5, -3.0], [1.0, 0.25], [0.0, 0.0]]))
    torch.testing.assert_close(env.last_action, torch.tensor([[1.0, -2.0], [2.0, 0.5], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        adapter.step(torch.zeros(3, 7))


def test_seeded_resets_give_per_world_states_and_partial_resets_touch_only_their_worlds():
    env = FakeManagerEnv()
    adapter = make(env)
    seed = adapter.world_seed(11, 0)
    shared, _ = adapter.reset(seed=[seed] * 3)
    assert env.seeds == [seed] * 3
    assert torch.equal(shared["proprio"][0], shared["proprio"][1]) and torch.equal(
        shared["proprio"][0], shared["proprio"][2]
    )

    env.seeds.clear()
    before, _ = adapter.reset(seed=5)
    assert env.seeds == [adapter.world_seed(5, i) for i in range(3)] and len(set(env.seeds)) == 3
    after, _ = adapter.reset(seed=[seed], env_ids=torch.tensor([1]))
    assert torch.equal(after["proprio"][1], shared["proprio"][1])
    assert torch.equal(after["proprio"][[0, 2]], before["proprio"][[0, 2]])
    assert torch.equal(env.x[0], before["proprio"][0, :2]), "world 0 of the simulator was not reset again"
    again, _ = adapter.reset(seed=5)
    assert torch.equal(again["proprio"], before["proprio"])
    assert adapter.world_seed(1, 0) != adapter.world_seed(0, 1)


def test_batch_seeding_seeds_once_for_all_worlds():
    env = FakeManagerEnv()
    adapter = make(env, seeding="batch")
    env.seeds.clear()
    first, _ = adapter.reset(seed=3)
    assert len(env.seeds) == 1
    second, _ = adapter.reset(seed=3)
    assert torch.equal(first["proprio"], second["proprio"])


def test_direct_env_partial_reset_and_success_from_termination():
    env = FakeDirectEnv()
    adapter = make(env, task=CABINET)
    adapter.reset(seed=2)
    env.x[:] = torch.tensor([[0.45, 0.1], [0.2, 0.3], [0.1, 0.1]])
    result = adapter.step(torch.tensor([[0.5, 0.0], [0.0, 0.0], [0.0, 0.0]]))  # x0: 0.45 + 0.125
    assert result.terminated.tolist() == [True, False, False]
    assert result.info["success"].tolist() == [True, False, False]
    torch.testing.assert_close(result.info["final_obs"]["proprio"][0], torch.tensor([0.575, 0.1, 1.0]))
    obs, _ = adapter.reset(env_ids=torch.tensor([2]))
    torch.testing.assert_close(obs["proprio"][1], torch.tensor([0.2, 0.3, 1.0]))
    assert obs["proprio"][2, 2] == 0 and env.episode_length_buf.tolist() == [0, 1, 0]
    adapter.close()
    assert env.closed


def test_missing_final_observation_is_an_error_not_a_wrong_row():
    env = FakeManagerEnv(compute_final_obs=False)
    env.cfg.compute_final_obs = True  # claims the flag but, like an old build, never fills extras
    adapter = make(env)
    adapter.reset()
    env.cfg.compute_final_obs = False
    with pytest.raises(RuntimeError, match="final_obs"):
        step_to_goal_and_drop(adapter, env)


def test_bad_success_terms_and_observation_group_are_rejected():
    with pytest.raises(ValueError, match="object_lifted"):
        make(FakeManagerEnv(), success_terms=["object_lifted"])
    with pytest.raises(ValueError, match="policy_group"):
        make(FakeManagerEnv(), policy_group="vision")


def test_bounded_action_spaces_map_affinely_and_images_convert_to_uint8_rgb():
    low, high = torch.tensor([0.0, -4.0]), torch.tensor([2.0, 4.0])
    mapped = unit_to_env_action(torch.tensor([[-1.0, 0.5], [2.0, 0.0]]), 2, 2, low, high, 1.0, "cpu")
    torch.testing.assert_close(mapped, torch.tensor([[0.0, 2.0], [2.0, 0.0]]))
    rgba = torch.tensor([10, 20, 30, 255], dtype=torch.uint8).expand(1, 2, 2, 4)
    assert rgb_uint8(rgba, torch.device("cpu"))[0, 0, 0].tolist() == [10, 20, 30]
    already_0_255 = torch.tensor([127.6, 0.0, 255.0]).expand(1, 1, 1, 3)
    assert rgb_uint8(already_0_255, torch.device("cpu")).flatten().tolist() == [128, 0, 255]
    with pytest.raises(ValueError, match="camera images"):
        rgb_uint8(torch.zeros(2, 4, 4), torch.device("cpu"))
