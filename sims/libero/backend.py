"""The ``libero`` backend: LIBERO's task suites (``libero_spatial``, ``libero_object``,
``libero_goal``, ``libero_10``, ``libero_90``) run in a worker process.

LIBERO pins robosuite 1.4 and its own MuJoCo, so it lives in an environment of its own (README,
"Simulator backends"); nothing here imports it until a worker process builds the worlds.
"""

from __future__ import annotations

import importlib.util

from vla_rl.sims.libero.tasks import assets_problem, resolve_assets_dir

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import MissingExtraError

INSTALL_HINT = (
    "build its own environment with `make .venv-libero` (LIBERO pins robosuite 1.4.0; README, "
    '"Simulator backends")'
)


EVALUATION_OPTIONS = {"init_states": "protocol"}
"""How evaluations run LIBERO (``vla_rl.envs.registry.evaluation_env_config``): every fixed initial
state of a task once per 50 of its episodes, in order, as the field's LIBERO evaluations do."""


def _missing_packages() -> str | None:
    missing = [name for name in ("libero", "robosuite") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"needs the Python packages {', '.join(missing)}: {INSTALL_HINT}"


def unavailable_reason() -> str | None:
    """Missing LIBERO/robosuite packages, or no assets directory (``$LIBERO_ASSETS_DIR`` or the
    ``assets/`` folder of a LIBERO source checkout; ``env.options.assets_dir`` is per config)."""
    return _missing_packages() or assets_problem(resolve_assets_dir(None))


def make_env(cfg: EnvConfig) -> BatchedEnv:
    """``cfg.task`` is ``"<suite>/<task index>"`` (or ``"<suite>"`` for all of its tasks)."""
    from vla_rl.sims.libero.env import LiberoBatchedEnv, check_config  # light: LIBERO loads in the worker

    check_config(cfg)
    assets_dir = resolve_assets_dir(cfg.options.get("assets_dir"))
    problem = assets_problem(assets_dir)
    if problem is not None:
        raise ValueError(problem)
    missing = _missing_packages()
    if missing is not None:
        raise MissingExtraError(f"the 'libero' backend {missing}")
    return LiberoBatchedEnv(cfg, assets_dir)
