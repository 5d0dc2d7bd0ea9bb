"""``benchmarks.rl_checkpoint_eval``'s options reach the evaluation.

The policy and its evaluation are stand-ins here (recording the config they are given): loading and
evaluating a real policy is covered by the trainer's tests, and this checks only which episodes
(seed, world count) the start and the end are asked to run on.
"""

from pathlib import Path

from benchmarks import rl_checkpoint_eval
from vla_rl.training.checkpoint import write_config
from vla_rl.training.chunk_rl.config_load import compose_rl_config


def write_run(run_dir: Path, seed: int) -> None:
    cfg = compose_rl_config(["recipe=token_vla_ppo", f"policy.init_from={run_dir}", f"seed={seed}"])
    write_config(run_dir, cfg)


def record_evaluations(monkeypatch) -> list[tuple[int, int, int, bool]]:
    calls: list[tuple[int, int, int, bool]] = []

    class StandIn:
        def eval(self):
            return self

    def evaluate(policy, cfg, split, episodes, deterministic):
        calls.append((cfg.seed, cfg.eval.num_envs, episodes, deterministic))
        return type("Result", (), {"success_rate": 0.5})()

    # Without an annealed exploration both are loaded at minute 0 of the run's clock.
    monkeypatch.setattr(rl_checkpoint_eval, "load_rl_policy", lambda cfg, source, minutes: StandIn())
    monkeypatch.setattr(rl_checkpoint_eval, "resolve_policy_dir", lambda source: source)
    monkeypatch.setattr(rl_checkpoint_eval, "evaluate_rl_policy", evaluate)
    return calls


def test_the_run_seed_is_used_unless_another_is_given(tmp_path: Path, monkeypatch) -> None:
    write_run(tmp_path, seed=4)
    calls = record_evaluations(monkeypatch)
    rl_checkpoint_eval.evaluate_start_and_end(tmp_path, 512, worlds=64, modes=("sampled",))
    assert calls == [(4, 64, 512, False), (4, 64, 512, False)]
    calls.clear()
    results = rl_checkpoint_eval.evaluate_start_and_end(tmp_path, 512, worlds=64, modes=("sampled",), seed=2)
    assert calls == [(2, 64, 512, False), (2, 64, 512, False)]
    assert results == {"SFT": {"sampled": 0.5}, "RL": {"sampled": 0.5}}
