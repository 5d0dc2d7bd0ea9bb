import numpy as np
import torch

from vla_rl.policies import RunningMeanStd


def test_parallel_update_matches_numpy_on_concatenated_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) * np.array([1, 10, 0.1, 1]) for n in (5, 17, 1, 40)]
    rms = RunningMeanStd((4,))
    for batch in batches:
        rms.update(torch.as_tensor(batch, dtype=torch.float32))
    everything = np.concatenate(batches).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(axis=0), rtol=1e-10)
    assert float(rms.count) == 63


def test_normalises_by_hand_and_clips():
    rms = RunningMeanStd((1,), epsilon=0.0, clip=5.0)
    rms.update(torch.tensor([[1.0], [3.0]]))  # mean 2, population variance 1
    out = rms(torch.tensor([[4.0], [2.0], [100.0], [-100.0]]))
    torch.testing.assert_close(out, torch.tensor([[2.0], [0.0], [5.0], [-5.0]]))


def test_statistics_live_in_the_state_dict():
    rms = RunningMeanStd((2,))
    rms.update(torch.ones(3, 2))
    state = rms.state_dict()
    assert set(state) == {"mean", "var", "count"}
    fresh = RunningMeanStd((2,))
    fresh.load_state_dict(state)
    torch.testing.assert_close(fresh(torch.full((1, 2), 2.0)), rms(torch.full((1, 2), 2.0)))
