"""Several environments presented as one: the worlds split into stages for pipelined rollouts.

A ``StagedEnv`` of S stages holds S environments of N / S worlds each and behaves like one
environment of N worlds (stage s owns rows ``stage_rows(s)``). Stepped as a whole it steps every
stage. The rollout collector instead steps the stages in turn with ``step_async`` / ``step_wait``,
so that while the physics of one stage runs in the background, the policy acts for another: on a
machine whose cores all simulate during the physics call, the single-threaded Python work around
it (observations, policy, controller) otherwise leaves cores idle. Each stage pays the per-call
costs again, so it pays where the physics runs elsewhere (a GPU) or the worlds are many; on a
2-core CPU with 64 worlds it measured no faster than one stage (README, throughput).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, adopt_spec, env_spec, world_seeds


def concat_observations(parts: Sequence[Observation]) -> Observation:
    """Observations of consecutive world groups -> one batch (tensors concatenated, lists joined)."""
    merged: Observation = {}
    for key, first in parts[0].items():
        if isinstance(first, torch.Tensor):
            merged[key] = torch.cat([part[key] for part in parts])
        else:
            merged[key] = [item for part in parts for item in part[key]]
    return merged


def _concat_episode_info(results: Sequence[StepResult]) -> dict[str, torch.Tensor] | None:
    """``info["episode"]`` of the whole batch; stages where no episode ended contribute zeros
    (the entries are only read where ``done``)."""
    present = [r.info["episode"] for r in results if "episode" in r.info]
    if not present:
        return None
    merged = {}
    for key, sample in present[0].items():
        merged[key] = torch.cat(
            [
                r.info["episode"][key]
                if "episode" in r.info
                else torch.zeros(len(r.reward), dtype=sample.dtype, device=sample.device)
                for r in results
            ]
        )
    return merged


def concat_step_results(results: Sequence[StepResult]) -> StepResult:
    """Step results of consecutive world groups -> one result of the whole batch."""
    info: dict[str, Any] = {
        "success": torch.cat([r.info["success"] for r in results]),
        "final_obs": concat_observations([r.info["final_obs"] for r in results]),
    }
    episode = _concat_episode_info(results)
    if episode is not None:
        info["episode"] = episode
    if any("lost" in r.info for r in results):  # steps of replaced env workers (vla_rl.distributed)
        info["lost"] = torch.cat(
            [r.info.get("lost", torch.zeros(len(r.reward), dtype=torch.bool)).cpu() for r in results]
        )
    return StepResult(
        obs=concat_observations([r.obs for r in results]),
        reward=torch.cat([r.reward for r in results]),
        terminated=torch.cat([r.terminated for r in results]),
        truncated=torch.cat([r.truncated for r in results]),
        info=info,
    )


class StagedEnv(BatchedEnv):
    """``stages`` environments with the same spaces, as one environment of all their worlds."""

    def __init__(self, stages: Sequence[BatchedEnv]) -> None:
        if not stages:
            raise ValueError("a staged environment needs at least one stage")
        first = stages[0]
        for stage in stages[1:]:
            if stage.observation_space != first.observation_space or stage.action_space != first.action_space:
                raise ValueError("all stages must have the same observation and action spaces")
        self.stages = list(stages)
        adopt_spec(self, {**env_spec(first), "num_envs": sum(stage.num_envs for stage in stages)})
        self._starts = [0]
        for stage in stages:
            self._starts.append(self._starts[-1] + stage.num_envs)
        self._last_obs: list[Observation | None] = [None] * len(self.stages)
        """Each stage's latest observation (a partial reset returns the others unchanged)."""

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    def stage_rows(self, stage: int) -> slice:
        """Rows of the whole batch that stage ``stage`` holds."""
        return slice(self._starts[stage], self._starts[stage + 1])

    def world_seed(self, seed: int, world: int) -> int | list[int]:
        stage = max(s for s in range(len(self.stages)) if self._starts[s] <= world)
        return self.stages[stage].world_seed(seed, world)

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Worlds keep their index in the whole batch, so an int ``seed`` gives world ``i`` the
        stream it would get in one environment of all the worlds."""
        ids = (
            torch.arange(self.num_envs)
            if env_ids is None
            else torch.as_tensor(env_ids).reshape(-1).cpu().to(torch.long)
        )
        seeds = world_seeds(self, seed, ids)
        parts = []
        for index, stage in enumerate(self.stages):
            rows = self.stage_rows(index)
            in_stage = (ids >= rows.start) & (ids < rows.stop)
            local = ids[in_stage] - rows.start
            stage_seed = None if seed is None else [seeds[i] for i in in_stage.nonzero().flatten().tolist()]
            if env_ids is not None and len(local) == 0 and self._last_obs[index] is not None:
                parts.append(self._last_obs[index])
                continue
            obs, _ = stage.reset(seed=stage_seed, env_ids=None if env_ids is None else local)
            self._last_obs[index] = obs
            parts.append(obs)
        return concat_observations(parts), {}

    def record_timeline(self, timeline: Any) -> None:
        """Have every stage that supports it (the MuJoCo backend) record its physics spans in
        ``timeline`` (a ``vla_rl.envs.timeline.Timeline``), tagged with the stage index."""
        for index, stage in enumerate(self.stages):
            if hasattr(stage, "timeline"):
                stage.timeline, stage.timeline_stage = timeline, index

    def skip_images_next_step(self) -> None:
        """The hint (``BatchedEnv.skip_images_next_step``) goes to every stage."""
        for stage in self.stages:
            stage.skip_images_next_step()

    def step_stage_async(self, stage: int, action: torch.Tensor) -> None:
        """Start stepping stage ``stage`` with its rows' actions ``action`` [N_stage, A]."""
        self.stages[stage].step_async(action)

    def step_stage_wait(self, stage: int) -> StepResult:
        """The result (stage rows only) of the step started by ``step_stage_async``."""
        result = self.stages[stage].step_wait()
        self._last_obs[stage] = result.obs
        return result

    def step(self, action: torch.Tensor) -> StepResult:
        for index in range(self.num_stages):
            self.step_stage_async(index, action[self.stage_rows(index)])
        return concat_step_results([self.step_stage_wait(index) for index in range(self.num_stages)])

    def state_dict(self) -> dict[str, Any]:
        return {"stages": [stage.state_dict() for stage in self.stages]}

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        saved = state["stages"]
        if len(saved) != len(self.stages):
            raise ValueError(f"the snapshot has {len(saved)} stages, this environment {len(self.stages)}")
        self._last_obs = [stage.load_state_dict(part) for stage, part in zip(self.stages, saved, strict=True)]
        return concat_observations(self._last_obs)

    def close(self) -> None:
        for stage in self.stages:
            stage.close()
