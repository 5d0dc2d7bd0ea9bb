"""The jobs the command line runs, and how a command finds its job and config, in one place.

``vla-rl train`` runs ``ppo`` (a state policy, ``configs/train.yaml``) or, given ``recipe=NAME``,
``rl`` (RL fine-tuning of a chunk policy, ``configs/rl.yaml`` and ``configs/recipe``) or, given
``algorithm=sac`` or ``algorithm=rlpd``, ``off_policy`` (``configs/off_policy.yaml``); ``vla-rl
sft`` runs ``sft`` (``configs/sft.yaml``). Every run writes its job into its ``config.yaml``
(``job: ppo|rl|sft``), so ``--resume PATH`` runs the job that wrote the folder. Run folders written
before that key existed are told apart by their keys (``job_of_saved_config``).

Resuming from a path loads the run's own ``config.yaml`` with the command's overrides on top and
``resume`` set to the checkpoint; ``resume=auto`` (or ``--resume auto``) composes the config as a
new run would and continues from the latest checkpoint of its ``run_dir``, if any.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from vla_rl.config.load import ConfigError
from vla_rl.registry import resolve
from vla_rl.training.checkpoint import CONFIG_FILENAME, resolve_checkpoint_dir

JOBS = {
    "ppo": "vla_rl.config.load:TRAIN_JOB",
    "rl": "vla_rl.training.chunk_rl.config_load:RL_JOB",
    "sft": "vla_rl.training.sft.config_load:SFT_JOB",
    "off_policy": "vla_rl.training.off_policy.config_load:OFF_POLICY_JOB",
}
"""Job -> its ``JobSchema``: its config composed from ``configs/``, or loaded from a run's
``config.yaml``, with Hydra-syntax overrides."""
ALGORITHM_KEY = "algorithm"
"""The override whose off-policy choices (``OFF_POLICY_ALGORITHMS``) pick the ``off_policy`` job."""
OFF_POLICY_ALGORITHMS = ("sac", "rlpd")
"""``configs/algorithm/`` choices of the off-policy learner (``configs/off_policy.yaml``)."""
RECIPE_KEY = "recipe"
"""The override that picks an RL recipe, and with it the ``rl`` job of ``vla-rl train``."""
RESUME_KEY = "resume"


def override_value(overrides: Sequence[str], key: str) -> str | None:
    """The value a Hydra-syntax override gives ``key`` (``+``/``~`` prefixes ignored); ``None`` when
    none does or it is empty or ``null``."""
    for override in overrides:
        name, _, value = override.partition("=")
        if name.lstrip("+~") == key:
            return None if value in ("", "null") else value
    return None


def resolve_run_checkpoint(path: str | Path, key: str = RESUME_KEY) -> Path:
    """The checkpoint a run folder, its ``checkpoints`` folder or a checkpoint folder names,
    absolute; a ``ConfigError`` naming ``key`` when there is none."""
    try:
        return resolve_checkpoint_dir(path).resolve()
    except FileNotFoundError as error:
        raise ConfigError(f"config key '{key}': {error}") from None


def job_of_saved_config(saved: dict[str, Any]) -> str:
    """The job of a saved ``config.yaml``: its ``job`` key or, in a run folder written without it,
    its keys (``data`` only in SFT configs, ``algorithm.execute_steps`` only in RL configs)."""
    if "job" in saved:
        return str(saved["job"])
    if "data" in saved:
        return "sft"
    return "rl" if "execute_steps" in (saved.get("algorithm") or {}) else "ppo"


def job_of_checkpoint(folder: Path) -> str:
    """The job of a checkpoint or run folder (its ``config.yaml``)."""
    return job_of_saved_config(yaml.safe_load((folder / CONFIG_FILENAME).read_text()) or {})


def train_job(overrides: Sequence[str], resume: str | None) -> str:
    """``vla-rl train``'s job: the job of the run resumed from a path, else ``rl`` with a
    ``recipe=`` override, ``off_policy`` with ``algorithm=sac`` or ``algorithm=rlpd``, and ``ppo``
    otherwise."""
    recipe = override_value(overrides, RECIPE_KEY)
    if resume and resume != "auto":
        job = job_of_checkpoint(resolve_run_checkpoint(resume))
        if recipe is not None and job != "rl":
            raise ConfigError(
                f"config key 'recipe': the run at {resume} is a {job!r} run, not an RL fine-tuning"
            )
        return job
    if recipe is not None:
        return "rl"
    return "off_policy" if override_value(overrides, ALGORITHM_KEY) in OFF_POLICY_ALGORITHMS else "ppo"


def job_config(job: str, overrides: Sequence[str], resume: str | None = None) -> Any:
    """The validated config of ``job``: composed from ``configs/`` or, when ``resume`` (or a
    ``resume=`` override) names a run or checkpoint folder, that run's own config; ``overrides`` on top."""
    resume = resume or override_value(overrides, RESUME_KEY)
    kept = [o for o in overrides if o.partition("=")[0].lstrip("+~") != RESUME_KEY]
    if resume is None or resume == "auto":
        return resolve(JOBS, job, "job").compose([*kept, *(["resume=auto"] if resume == "auto" else [])])
    checkpoint = resolve_run_checkpoint(resume)
    kept = [o for o in kept if not _picks_job(o)]  # the saved config holds the recipe or learner
    _refuse_group_choices(kept, resume)
    return resolve(JOBS, job, "job").load_file(checkpoint / CONFIG_FILENAME, [*kept, f"resume={checkpoint}"])


def config_groups() -> set[str]:
    """The config groups of ``configs/`` (``env``, ``policy``, ...): its folders."""
    from importlib.resources import files

    entries = files("vla_rl.configs").iterdir()
    return {entry.name for entry in entries if entry.is_dir() and not entry.name.startswith("_")}


def _refuse_group_choices(overrides: Sequence[str], resume: str) -> None:
    """A run resumed from a path continues its saved, resolved config, in which a group choice such
    as ``env=pick_place`` has nothing to choose from: a ``ConfigError`` naming it, rather than the
    unknown-key error on the next ``env.*`` override that it would cause."""
    groups = config_groups()
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") in groups:
            raise ConfigError(
                f"config key '{key.lstrip('+~')}': the group choice {override!r} cannot change the run "
                f"resumed from {resume} (its saved config already holds its {key.lstrip('+~')}); drop it, "
                "or use resume=auto with the run's original overrides"
            )


def _picks_job(override: str) -> bool:
    """A ``recipe=`` or an off-policy ``algorithm=`` choice: a group choice that picked the job."""
    key, _, value = override.partition("=")
    key = key.lstrip("+~")
    return key == RECIPE_KEY or (key == ALGORITHM_KEY and value in OFF_POLICY_ALGORITHMS)
