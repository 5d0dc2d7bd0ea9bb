"""The driver of data-parallel ranks sends its weights only when the ranks may not hold them (a new
group, a checkpoint loaded), and takes each new version back with its checksum."""

from __future__ import annotations

import torch

from vla_rl.distributed.data_parallel import DataParallelAlgorithm, DataParallelRank
from vla_rl.distributed.runtime import InProcessRuntime


class AddToWeights:
    """An "algorithm" whose update adds the batch to every weight."""

    def __init__(self, policy: torch.nn.Module) -> None:
        self.policy = policy

    @torch.no_grad()
    def update(self, batch: float) -> dict[str, float]:
        for parameter in self.policy.parameters():
            parameter += batch
        return {"added": batch}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class RecordingRank(DataParallelRank):
    """Records whether each update came with the driver's weights; joins no process group."""

    def __init__(self, received: list[bool], rank: int, world_size: int) -> None:
        self.rank, self.received = rank, received
        self.policy = torch.nn.Linear(2, 1)  # not the driver's initial weights
        self.algorithm = AddToWeights(self.policy)

    def join(self, address) -> None:
        pass

    def update(self, batch, policy_state):
        self.received.append(policy_state is not None)
        return super().update(batch, policy_state)


def test_the_weights_go_to_the_ranks_when_they_may_not_hold_them_and_every_version_comes_back() -> None:
    torch.manual_seed(0)
    policy, received = torch.nn.Linear(2, 1), []
    start = policy.weight.detach().clone()
    algorithm = DataParallelAlgorithm(InProcessRuntime(), policy, RecordingRank, (received,), world_size=1)
    assert algorithm.update(1.0) == {"added": 1.0} and algorithm.update(1.0) == {"added": 1.0}
    assert received == [True, False]  # the new group gets the driver's weights once
    torch.testing.assert_close(policy.weight.detach(), start + 2.0)
    assert algorithm.version == 2
    with torch.no_grad():
        policy.weight.zero_()  # a checkpoint's weights, loaded with its optimizer state
    algorithm.load_state_dict({})
    algorithm.update(1.0)
    assert received == [True, False, True]
    torch.testing.assert_close(policy.weight.detach(), torch.ones_like(start))
    algorithm.restart()
    algorithm.update(1.0)
    assert received == [True, False, True, True]  # a restarted group gets them again
    algorithm.close()
