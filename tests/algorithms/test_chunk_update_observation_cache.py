"""An update stores the policy's observation cache (pi0's frozen prefix) once and trains as without it."""

from __future__ import annotations

import pytest
import torch
from chunk_rollouts import PROPRIO_DIM, config, rollout

from vla_rl.algorithms.chunk_ppo import ChunkPPO
from vla_rl.policies.flow.pi0_prefix import PREFIX_KEYS, PREFIX_MASK
from vla_rl.policies.registry import build_chunk_policy

torch.set_num_threads(1)


def frozen_pi0(reuse: bool = True):
    torch.manual_seed(0)
    policy = build_chunk_policy(
        "pi0",
        chunk_len=3,
        action_dim=2,
        proprio_dim=PROPRIO_DIM,
        exploration="flow_noise",
        reuse_frozen_prefix=reuse,
    )
    policy.model.model.vlm.requires_grad_(False)
    return policy


def prepared(algorithm, batch):
    advantages, returns = batch.gae(algorithm.cfg.gae_lambda)
    flat = batch.flat({"advantages": advantages, "returns": returns})
    algorithm.recompute(flat)
    return flat


def test_recompute_stores_the_prefix_and_the_first_minibatch_has_ratio_one():
    policy = frozen_pi0()
    algorithm = ChunkPPO(policy, config(num_minibatches=3))
    flat = prepared(algorithm, rollout(policy, num_decisions=3, num_worlds=4))
    assert flat.sample_info[PREFIX_KEYS].shape[0] == len(flat) == 12
    assert flat.sample_info[PREFIX_MASK].shape == (12, flat.sample_info[PREFIX_KEYS].shape[3])
    first = algorithm.losses(next(flat.minibatches(2, torch.Generator().manual_seed(0))))
    assert first.ratio_mean == pytest.approx(1.0, abs=1e-5)
    assert first.clip_fraction == 0.0


def test_training_with_the_stored_prefix_moves_the_policy_as_without_it():
    batch = rollout(frozen_pi0(), num_decisions=2, num_worlds=4)
    trained = {}
    for reuse in (True, False):
        policy = frozen_pi0(reuse)
        algorithm = ChunkPPO(policy, config(actor_lr=1e-3, num_epochs=2, num_minibatches=2))
        flat = prepared(algorithm, batch)
        assert (PREFIX_KEYS in flat.sample_info) is reuse
        algorithm.optimise(flat)
        trained[reuse] = {name: p.detach().clone() for name, p in policy.named_parameters()}
    start = dict(frozen_pi0().named_parameters())
    moved = [name for name in start if not torch.equal(start[name], trained[True][name])]
    assert moved and not any(name.startswith("model.model.vlm.") for name in moved)
    for name, value in trained[True].items():
        torch.testing.assert_close(value, trained[False][name], atol=1e-5, rtol=1e-4)
