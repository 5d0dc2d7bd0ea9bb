"""The off-policy replay buffer: ring order, frame sharing across autoresets, never a transition with
an overwritten frame, memory, exact resume, and filling from recorded episodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from data_test_episodes import three_episodes

from vla_rl.data.replay_buffer import ReplayBuffer, TransitionBatch
from vla_rl.data.replay_episodes import add_episode, replay_from_episodes


def encoded_obs(world: torch.Tensor, episode: torch.Tensor, step: torch.Tensor) -> dict:
    """Per world, ``proprio = (world, episode, step)`` and a 4x4 image whose pixels are the same triple."""
    proprio = torch.stack([world, episode, step], dim=1).float()
    image = torch.stack([world, episode, step], dim=1).to(torch.uint8)[:, None, None, :].expand(-1, 4, 4, 3)
    return {"proprio": proprio, "rgb_front": image.contiguous(), "instruction": ["count"] * len(world)}


def episode_length(world: torch.Tensor, episode: torch.Tensor) -> torch.Tensor:
    return 2 + (world + episode) % 3


class CountingEnv:
    """N worlds whose observations spell out (world, episode, step). Episode ``e`` of world ``w`` lasts
    ``2 + (w + e) % 3`` steps and ends terminated where ``w + e`` is even, truncated where odd; the
    reward of a step is the step number reached. Autoreset as in ``BatchedEnv.step``."""

    def __init__(self, num_envs: int) -> None:
        self.world = torch.arange(num_envs)
        self.episode = torch.zeros(num_envs, dtype=torch.int64)
        self.step_count = torch.zeros(num_envs, dtype=torch.int64)
        self.steps_taken = 0

    def obs(self) -> dict:
        return encoded_obs(self.world, self.episode, self.step_count)

    def action(self) -> torch.Tensor:
        """(world, episode, step, transition number): what a transition can be checked against."""
        number = self.steps_taken * len(self.world) + self.world
        return torch.stack([self.world, self.episode, self.step_count, number], dim=1).float()

    def step(self) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        self.step_count += 1
        self.steps_taken += 1
        ended = self.step_count >= episode_length(self.world, self.episode)
        even = (self.world + self.episode) % 2 == 0
        final_obs = self.obs()
        reward = self.step_count.float()
        self.episode[ended] += 1
        self.step_count[ended] = 0
        return self.obs(), reward, ended & even, ended & ~even, final_obs


def intervened(number: torch.Tensor) -> torch.Tensor:
    return number.long() % 3 == 0


def run(buffer: ReplayBuffer, env: CountingEnv, steps: int, intervention: bool = False) -> None:
    obs = env.obs()
    for _ in range(steps):
        action = env.action()
        next_obs, reward, terminated, truncated, final_obs = env.step()
        flags = intervened(action[:, 3]) if intervention else None
        buffer.add(obs, action, reward, terminated, truncated, final_obs, intervention=flags)
        obs = next_obs


def assert_consistent(batch: TransitionBatch, transitions_added: int, capacity: int) -> None:
    """Every row pairs the obs its action was taken from with the step after it in the same episode."""
    world, episode, step, number = batch.action.long().unbind(1)
    assert torch.equal(batch.obs["proprio"].long(), torch.stack([world, episode, step], 1))
    assert torch.equal(batch.next_obs["proprio"].long(), torch.stack([world, episode, step + 1], 1))
    for obs in (batch.obs, batch.next_obs):
        assert torch.equal(obs["rgb_front"][:, 2, 3].long(), obs["proprio"].long())
    ends = step + 1 == episode_length(world, episode)
    even = (world + episode) % 2 == 0
    assert torch.equal(batch.terminated, ends & even)
    assert torch.equal(batch.truncated, ends & ~even)
    assert torch.equal(batch.reward, (step + 1).float())
    assert bool((number >= transitions_added - capacity).all()), "a transition older than the ring"


def test_ring_wraps_around_keeping_the_last_capacity_transitions():
    # capacity 4, 2 worlds, no episode end; step s observes proprio (w, s). Default frame_capacity
    # 4 + 2 * 2 = 8. Step 0 writes obs frames 0, 1 and next frames 2, 3; steps 1, 2 and 3 reuse the
    # previous next frames and write 4-5, 6-7, 8-9. Transition k = 2 s + w sits in slot k % 4, so
    # after 4 steps (k = 0..7) the slots hold k = 4, 5, 6, 7: steps 2 and 3.
    buffer = ReplayBuffer(capacity=4, num_envs=2)
    worlds = torch.arange(2).float()

    def obs(step: int) -> dict:
        return {"proprio": torch.stack([worlds, torch.full((2,), float(step))], 1)}

    no = torch.zeros(2, dtype=torch.bool)
    for s in range(3):
        buffer.add(obs(s), obs(s)["proprio"], torch.full((2,), float(s)), no, no, obs(s + 1))
    # after 3 steps: slots 0, 1 hold k = 4, 5 (step 2), slots 2, 3 hold k = 2, 3 (step 1)
    assert buffer.transitions["obs_frame"].tolist() == [4, 5, 2, 3]
    assert buffer.transitions["next_frame"].tolist() == [6, 7, 4, 5]
    buffer.add(obs(3), obs(3)["proprio"], torch.full((2,), 3.0), no, no, obs(4))
    assert buffer.transitions_written == 8 and buffer.frames_written == 10
    assert buffer.transitions["obs_frame"].tolist() == [4, 5, 6, 7]
    assert buffer.transitions["next_frame"].tolist() == [6, 7, 8, 9]
    assert len(buffer) == 4  # the oldest kept frame is 10 - 8 = 2: all whole
    batch = buffer.gather(buffer.valid_slots())
    assert batch.action.tolist() == [[0, 2], [1, 2], [0, 3], [1, 3]]
    assert batch.next_obs["proprio"][:, 1].tolist() == [3, 3, 4, 4]
    assert batch.reward.tolist() == [2, 2, 3, 3]


def test_next_obs_across_an_autoreset_is_the_final_obs_and_the_reset_obs_gets_its_own_frame():
    # World 0's first episode lasts 2 steps (terminated), world 1's 3 steps (truncated).
    # step 0: obs frames 0 (0,0,0), 1 (1,0,0); next frames 2 (0,0,1), 3 (1,0,1)
    # step 1: obs reuses 2, 3; next frames 4 (0,0,2: world 0's final obs), 5 (1,0,2)
    # step 2: world 0's obs is the reset (0,1,0), not frame 4: new frame 6; world 1 reuses 5;
    #         next frames 7 (0,1,1), 8 (1,0,3: world 1's final obs)
    buffer = ReplayBuffer(capacity=16, num_envs=2)
    run(buffer, CountingEnv(2), steps=3)
    assert buffer.frames_written == 9
    assert buffer.transitions["obs_frame"][:6].tolist() == [0, 1, 2, 3, 6, 5]
    assert buffer.transitions["next_frame"][:6].tolist() == [2, 3, 4, 5, 7, 8]
    batch = buffer.gather(buffer.valid_slots())
    assert batch.next_obs["proprio"][2].tolist() == [0, 0, 2]  # the final obs, not the reset (0, 1, 0)
    assert batch.obs["proprio"][4].tolist() == [0, 1, 0]
    assert batch.terminated.tolist() == [False, False, True, False, False, False]
    assert batch.truncated.tolist() == [False, False, False, False, False, True]
    assert_consistent(batch, 6, 16)


def test_an_obs_that_is_not_the_last_next_obs_is_stored_as_its_own_frame():
    # A reset outside step(): the next obs given differs from the world's last next_obs.
    buffer = ReplayBuffer(capacity=8, num_envs=1)
    one, no = torch.ones(1), torch.zeros(1, dtype=torch.bool)

    def obs(value: float) -> dict:
        return {"proprio": torch.full((1, 2), value)}

    buffer.add(obs(0), one[:, None], one, no, no, obs(1))
    buffer.add(obs(5), one[:, None], one, no, no, obs(6))  # not obs(1): frames 2 (obs) and 3 (next)
    assert buffer.frames_written == 4
    batch = buffer.gather(buffer.valid_slots())
    assert batch.obs["proprio"][:, 0].tolist() == [0, 5]
    assert batch.next_obs["proprio"][:, 0].tolist() == [1, 6]


def test_a_step_never_reuses_a_frame_it_is_about_to_overwrite():
    # 2 worlds, 4 frames (the least). Step 0 writes obs frames 0, 1 and next frames 2, 3; world 1's
    # episode ends there. At step 1 world 0 continues from frame 2 and world 1 starts anew, so the
    # step writes 3 or 4 frames: numbers 4-6 or 4-7, rows 0-2 or 0-3. Frame 2 (row 2) would be
    # overwritten by the step itself, so world 0's obs is written again: obs frames 4, 5, next 6, 7.
    buffer = ReplayBuffer(capacity=4, num_envs=2, frame_capacity=4)
    no, ended = torch.zeros(2, dtype=torch.bool), torch.tensor([False, True])

    def obs(*values: float) -> dict:
        return {"proprio": torch.tensor(values)[:, None]}

    buffer.add(obs(0, 10), torch.zeros(2, 1), torch.zeros(2), no, ended, obs(1, 11))
    buffer.add(obs(1, 20), torch.ones(2, 1), torch.zeros(2), no, no, obs(2, 21))
    assert buffer.frames_written == 8
    assert buffer.transitions["obs_frame"][2:].tolist() == [4, 5]
    assert len(buffer) == 2  # step 0's transitions lost frames 0, 1; step 1's are whole
    batch = buffer.gather(buffer.valid_slots())
    assert batch.obs["proprio"].squeeze(1).tolist() == [1, 20]
    assert batch.next_obs["proprio"].squeeze(1).tolist() == [2, 21]


@pytest.mark.parametrize(
    ("frame_capacity", "share_frames"),
    [(None, True), (40, True), (None, False)],
    ids=["default-frames", "few-frames", "no-sharing"],
)
def test_no_sample_pairs_frames_of_overwritten_data(frame_capacity: int | None, share_frames: bool):
    # 200 steps of 3 worlds (600 transitions) through 50 slots; episodes of 2-4 steps write an
    # extra frame each, so frames run out before slots do and the oldest transitions break.
    buffer = ReplayBuffer(50, 3, frame_capacity=frame_capacity, share_frames=share_frames)
    env = CountingEnv(3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        run(buffer, env, steps=10)
        assert len(buffer) <= buffer.num_stored <= 50
        assert_consistent(buffer.gather(buffer.valid_slots()), buffer.transitions_written, 50)
        for _ in range(5):
            assert_consistent(buffer.sample(len(buffer), generator), buffer.transitions_written, 50)
    if frame_capacity == 40:
        assert len(buffer) <= 40  # each whole transition has its own next frame among the 40
    else:
        assert len(buffer) > 30


def test_sampling_is_uniform_over_whole_transitions():
    buffer = ReplayBuffer(30, 3, frame_capacity=24)  # frames run short: some slots are broken
    run(buffer, CountingEnv(3), steps=40)
    whole = len(buffer)
    assert 0 < whole < buffer.num_stored
    generator = torch.Generator().manual_seed(1)
    counts: dict[int, int] = {}
    for _ in range(400):
        for number in buffer.sample(whole, generator).action[:, 3].long().tolist():
            counts[number] = counts.get(number, 0) + 1
    # every whole transition drawn, each about 400 times (binomial sd ~ 20)
    assert len(counts) == whole
    assert min(counts.values()) > 300 and max(counts.values()) < 500


def test_images_stay_uint8_and_vectors_become_float32():
    buffer = ReplayBuffer(8, 2)
    env = CountingEnv(2)
    obs = env.obs()
    obs["proprio"] = obs["proprio"].double()
    next_obs, reward, terminated, truncated, final_obs = env.step()
    buffer.add(obs, env.action(), reward, terminated, truncated, final_obs)
    assert buffer.frames["rgb_front"].dtype == torch.uint8
    assert buffer.frames["proprio"].dtype == torch.float32
    assert "instruction" not in buffer.frames
    batch = buffer.sample(2, torch.Generator().manual_seed(0))
    assert batch.obs["rgb_front"].dtype == batch.next_obs["rgb_front"].dtype == torch.uint8
    float_image = dict(next_obs, rgb_front=next_obs["rgb_front"].float())
    with pytest.raises(ValueError, match="uint8"):
        buffer.add(float_image, env.action(), reward, terminated, truncated, final_obs)


def test_frame_sharing_halves_frame_memory():
    # capacity 100, 2 worlds, 8x8x3 uint8 images (192 B) and 3 float32 proprio (12 B) per frame.
    # Shared: 100 + 2 * 2 = 104 frames -> 104 * 204 = 21216 B.
    # Not shared: 2 * (100 + 2) = 204 frames -> 204 * 204 = 41616 B.
    # Transitions: obs/next frame numbers 8 + 8, action 4 * 4, reward 4, three bools 3 = 39 B
    # -> 3900 B; per-world last frame 2 * 8 = 16 B.
    shared = ReplayBuffer(100, 2)
    separate = ReplayBuffer(100, 2, share_frames=False)
    no = torch.zeros(2, dtype=torch.bool)
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (61, 2, 8, 8, 3), dtype=torch.uint8, generator=generator)

    def obs(step: int) -> dict:
        return {"rgb_front": images[step], "proprio": torch.full((2, 3), float(step))}

    for s in range(60):  # 120 transitions: wraps around
        action = torch.full((2, 4), float(s))
        for buffer in (shared, separate):
            buffer.add(obs(s), action, torch.zeros(2), no, no, obs(s + 1))
    assert shared.nbytes == 21216 + 3900 + 16
    assert separate.nbytes == 41616 + 3900 + 16
    assert shared.frames["rgb_front"].nbytes / separate.frames["rgb_front"].nbytes == pytest.approx(104 / 204)
    assert len(shared) == len(separate) == 100
    one, other = (buffer.sample(64, torch.Generator().manual_seed(3)) for buffer in (shared, separate))
    for key in ("rgb_front", "proprio"):
        assert torch.equal(one.obs[key], other.obs[key])
        assert torch.equal(one.next_obs[key], other.next_obs[key])
    assert torch.equal(one.action, other.action)


def test_save_and_load_resume_exactly(tmp_path: Path):
    buffer = ReplayBuffer(30, 3, frame_capacity=28)
    env = CountingEnv(3)
    run(buffer, env, steps=25, intervention=True)
    path = tmp_path / "replay.safetensors"
    buffer.save(path)
    buffer.save(path)  # replacing an existing file
    assert [p.name for p in tmp_path.iterdir()] == ["replay.safetensors"]
    loaded = ReplayBuffer.load(path)
    assert loaded.frames_written == buffer.frames_written
    assert loaded.transitions_written == buffer.transitions_written
    for name, value in buffer.transitions.items():
        assert torch.equal(loaded.transitions[name], value), name
    for key, value in buffer.frames.items():
        assert torch.equal(loaded.frames[key], value), key
        assert loaded.frames[key].dtype == value.dtype
    assert torch.equal(loaded.last_frame, buffer.last_frame)

    def same_samples() -> None:
        a = buffer.sample(16, torch.Generator().manual_seed(7))
        b = loaded.sample(16, torch.Generator().manual_seed(7))
        assert torch.equal(a.action, b.action) and torch.equal(a.intervention, b.intervention)
        assert torch.equal(a.next_obs["rgb_front"], b.next_obs["rgb_front"])

    same_samples()
    # Both continue from the same env state: frame sharing picks up where it was.
    twin = CountingEnv(3)
    twin.episode, twin.step_count, twin.steps_taken = env.episode.clone(), env.step_count.clone(), 25
    run(buffer, env, steps=7)
    run(loaded, twin, steps=7)
    assert loaded.frames_written == buffer.frames_written
    same_samples()


def test_an_empty_buffer_saves_and_loads(tmp_path: Path):
    ReplayBuffer(4, 2).save(tmp_path / "empty.safetensors")
    loaded = ReplayBuffer.load(tmp_path / "empty.safetensors")
    assert len(loaded) == 0 and loaded.capacity == 4 and loaded.num_envs == 2


def test_truncation_is_not_termination():
    # World 0's episodes 0 and 2 end terminated (even), world 1's episode 0 truncated (odd).
    buffer = ReplayBuffer(64, 2)
    run(buffer, CountingEnv(2), steps=12)
    batch = buffer.gather(buffer.valid_slots())
    world, episode, step, _ = batch.action.long().unbind(1)
    ends = step + 1 == episode_length(world, episode)
    assert int(ends.sum()) == int(batch.terminated.sum()) + int(batch.truncated.sum())
    assert not bool((batch.terminated & batch.truncated).any())
    assert batch.terminated[ends].tolist() == ((world + episode)[ends] % 2 == 0).tolist()
    # a truncated step still points at its final observation, to bootstrap from
    last = batch.truncated.nonzero()[0, 0]
    assert batch.next_obs["proprio"][last, 2] == step[last] + 1


def test_intervention_flags_are_kept_and_default_to_false():
    buffer = ReplayBuffer(40, 2)
    run(buffer, CountingEnv(2), steps=10, intervention=True)
    batch = buffer.sample(20, torch.Generator().manual_seed(0))
    assert batch.intervention.dtype == torch.bool
    assert torch.equal(batch.intervention, intervened(batch.action[:, 3]))
    assert batch.intervention.any() and not batch.intervention.all()
    plain = ReplayBuffer(40, 2)
    run(plain, CountingEnv(2), steps=10)
    assert not plain.transitions["intervention"].any()


def test_obs_keys_store_only_those_keys_from_the_env_and_from_episodes(tmp_path: Path):
    keys = ["privileged", "proprio"]
    online = ReplayBuffer(8, 2, obs_keys=keys)
    obs = {"proprio": torch.zeros(2, 3), "privileged": torch.ones(2, 4), "objects": torch.ones(2, 5)}
    flags = torch.zeros(2, dtype=torch.bool)
    online.add(obs, torch.zeros(2, 1), torch.zeros(2), flags, flags, obs)
    assert sorted(online.frames) == keys
    with pytest.raises(ValueError, match=r"lacks the stored observation keys \['privileged'\]"):
        online.add({"proprio": torch.zeros(2, 3)}, torch.zeros(2, 1), torch.zeros(2), flags, flags, obs)
    demos = replay_from_episodes(three_episodes(seed=0), obs_keys=keys)
    assert sorted(demos.frames) == keys, "the episodes' camera images are not stored"
    online.save(tmp_path / "replay.safetensors")
    assert ReplayBuffer.load(tmp_path / "replay.safetensors").obs_keys == keys


def test_errors_are_clear():
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(capacity=2, num_envs=3)
    buffer = ReplayBuffer(8, 2)
    env = CountingEnv(2)
    obs = env.obs()
    _, reward, terminated, truncated, final_obs = env.step()
    with pytest.raises(ValueError, match="action has shape"):
        buffer.add(obs, torch.zeros(3, 4), reward, terminated, truncated, final_obs)
    with pytest.raises(ValueError, match="reward has shape"):
        buffer.add(obs, torch.zeros(2, 4), reward[:, None], terminated, truncated, final_obs)
    missing = {k: v for k, v in final_obs.items() if k != "rgb_front"}
    with pytest.raises(ValueError, match="missing \\['rgb_front'\\]"):
        buffer.add(obs, torch.zeros(2, 4), reward, terminated, truncated, missing)
    wide = dict(final_obs, proprio=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="rows of shape"):
        buffer.add(obs, torch.zeros(2, 4), reward, terminated, truncated, wide)
    with pytest.raises(ValueError, match="holding 0"):
        buffer.sample(1, torch.Generator())
    buffer.add(obs, torch.zeros(2, 4), reward, terminated, truncated, final_obs)
    with pytest.raises(ValueError, match="cannot sample 3 transitions from a buffer holding 2"):
        buffer.sample(3, torch.Generator())
    with pytest.raises(ValueError, match="keys"):  # episodes add 'privileged' and 'rgb_wrist'
        add_episode(buffer, three_episodes(seed=0)[0])
    episode = three_episodes(seed=0)[0]
    episode.rewards = None
    with pytest.raises(ValueError, match="rewards"):
        replay_from_episodes([episode])
    with pytest.raises(ValueError, match="capacity=8"):
        ReplayBuffer(9, 2).load_state_dict(buffer.state_dict())


def test_a_trajectory_pairs_each_frame_with_the_next_and_its_last_step_with_itself():
    buffer = ReplayBuffer(8, 1)
    frames = {"proprio": torch.arange(3.0)[:, None]}  # frames 0, 1, 2
    flags = torch.tensor([False, False, True])
    buffer.add_trajectory(
        frames, torch.zeros(3, 1), torch.arange(3.0), flags, ~flags, torch.zeros(3, dtype=torch.bool)
    )
    batch = buffer.gather(buffer.valid_slots())
    assert batch.obs["proprio"][:, 0].tolist() == [0.0, 1.0, 2.0]
    assert batch.next_obs["proprio"][:, 0].tolist() == [1.0, 2.0, 2.0]  # the terminal step: its own frame
    assert batch.terminated.tolist() == [False, False, True] and batch.reward.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="a trajectory of 3 frames cannot hold 4 transitions"):
        buffer.add_trajectory(
            frames, torch.zeros(4, 1), torch.zeros(4), *[torch.zeros(4, dtype=torch.bool)] * 3
        )
    with pytest.raises(ValueError, match="does not fit 8 transitions"):
        long = {"proprio": torch.zeros(9, 1)}
        buffer.add_trajectory(
            long, torch.zeros(9, 1), torch.zeros(9), *[torch.zeros(9, dtype=torch.bool)] * 3
        )
