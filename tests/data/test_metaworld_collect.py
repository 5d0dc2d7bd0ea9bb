"""MetaWorld's scripted experts: their success rate, and their episodes recorded as a LeRobot dataset
(runs in ``.venv-metaworld``: ``make test-metaworld``)."""

from __future__ import annotations

import numpy as np
import pytest

from vla_rl.envs.registry import backend_unavailable_reason

reason = backend_unavailable_reason("metaworld")
pytestmark = pytest.mark.skipif(reason is not None, reason=f"metaworld: {reason}")


@pytest.mark.parametrize("task", ["reach-v3", "push-v3"])
def test_experts_succeed_on_nearly_every_variation(task, tmp_path):
    """Measured over 50 seeded variations each: reach-v3 50/50, push-v3 50/50."""
    from vla_rl.data.metaworld_collect import collect_metaworld_demonstrations

    result = collect_metaworld_demonstrations(
        task, 10, tmp_path / task, num_envs=5, cameras=(), max_episode_steps=200, keep_failures=True
    )
    assert result.episodes_attempted == result.episodes_written == 10
    assert result.successes >= 9, f"{task}: expert succeeded {result.successes}/10"


def test_cli_records_mt10_episodes_with_images_and_instructions(tmp_path, capsys):
    """Two worlds of MT10 run reach-v3 and push-v3; reach ends first (about 50 steps), push next (about
    60), so the first two episodes written are one of each."""
    from vla_rl.sims.metaworld.tasks import INSTRUCTIONS

    from vla_rl.data.lerobot_format import dataset_version, open_dataset
    from vla_rl.data.metaworld_collect import main

    out = tmp_path / "mt10"
    argv = ["MT10", "--episodes", "2", "--output", str(out), "--num-envs", "2", "--image-size", "32"]
    assert main([*argv, "--max-steps", "150"]) == 0
    assert "wrote 2 episodes" in capsys.readouterr().out

    assert dataset_version(out) == "v3.0"  # the default, as for `vla-rl collect`
    dataset = open_dataset(out)
    assert dataset.num_episodes == 2 and dataset.fps == pytest.approx(80.0)
    assert sorted(dataset.tasks.values()) == sorted([INSTRUCTIONS["reach-v3"], INSTRUCTIONS["push-v3"]])
    for position in range(2):
        episode = dataset.episode(position)
        length = len(episode)
        assert 10 < length < 150 and episode.success
        assert episode.images["corner"].shape == (length, 32, 32, 3)
        assert episode.proprio.shape == (length, 4) and episode.privileged.shape == (length, 39)
        np.testing.assert_allclose(episode.proprio, episode.privileged[:, :4])
        assert np.all(np.abs(episode.actions) <= 1.0)
        assert episode.success_per_step[-1] and not episode.success_per_step[0]
    with pytest.raises(FileExistsError):
        main(argv)  # an existing dataset is only extended with --append
    older = tmp_path / "mt10_v21"
    argv_v21 = ["MT10", "--episodes", "1", "--output", str(older), "--num-envs", "2", "--image-size", "32"]
    assert main([*argv_v21, "--max-steps", "150", "--codebase-version", "v2.1"]) == 0
    assert dataset_version(older) == "v2.1" and open_dataset(older).num_episodes == 1
