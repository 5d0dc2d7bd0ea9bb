"""Starting Isaac Sim and building an Isaac Lab env from the task registry.

Isaac Sim must be running before any ``isaaclab_tasks`` / Omniverse module is imported, and it can be
started once per process, so the app is started here on the first env and kept for the process
(closing an env does not stop it). Isaac Lab hosts one simulation per process: close an env before
building the next.
"""

from __future__ import annotations

from typing import Any

from vla_rl.sims.isaaclab.settings import IsaacLabSettings

from vla_rl.envs.extras import MissingExtraError

_app: dict[str, Any] = {}
"""The running app launcher and whether it was started with cameras enabled."""

RUNTIME_HINT = (
    "needs Isaac Lab 3.x (the isaaclab and isaaclab_tasks packages) with Isaac Sim, "
    "Python 3.12 and an NVIDIA GPU, installed by Isaac Lab's own instructions "
    "(https://isaac-sim.github.io/IsaacLab); it is not a pip extra of this project"
)


def ensure_app(enable_cameras: bool) -> None:
    """Starts Isaac Sim headless through Isaac Lab's ``AppLauncher`` (once per process)."""
    if _app:
        if enable_cameras and not _app["enable_cameras"]:
            raise RuntimeError(
                "Isaac Sim was started without cameras in this process and cannot be restarted; "
                "build the env with cameras first or use a new process"
            )
        return
    try:
        from isaaclab.app import AppLauncher
    except ImportError as error:
        raise MissingExtraError(f"the isaaclab backend {RUNTIME_HINT} ({error})") from error
    _app["launcher"] = AppLauncher(headless=True, enable_cameras=enable_cameras)
    _app["enable_cameras"] = enable_cameras


def make_isaaclab_env(settings: IsaacLabSettings) -> Any:
    """The unwrapped Isaac Lab env (``ManagerBasedRLEnv`` or ``DirectRLEnv``) for ``settings``."""
    ensure_app(enable_cameras=bool(settings.cameras))
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers the Isaac-* task ids with gymnasium)
    from isaaclab_tasks.utils import parse_env_cfg

    if settings.task not in gym.registry:
        known = sorted(name for name in gym.registry if name.startswith("Isaac-"))
        raise ValueError(f"env.task: {settings.task!r} is not a registered Isaac Lab task; e.g. {known[:8]}")
    env_cfg = parse_env_cfg(settings.task, device=settings.sim_device, num_envs=settings.num_envs)
    configure_env_cfg(env_cfg, settings)
    if settings.spec.add_lift_success_term:
        add_lift_success_term(env_cfg)
    return gym.make(settings.task, cfg=env_cfg).unwrapped


def configure_env_cfg(env_cfg: Any, settings: IsaacLabSettings) -> None:
    """Applies the toolkit's settings to a parsed Isaac Lab env config (before the env is built)."""
    if settings.max_episode_steps > 0:
        # Isaac Lab's limit is ceil(episode_length_s / step_dt) steps; half a step under the wanted
        # count makes the ceiling exact whatever the float rounding of the product.
        step_dt_s = env_cfg.sim.dt * env_cfg.decimation
        env_cfg.episode_length_s = (settings.max_episode_steps - 0.5) * step_dt_s
    if hasattr(env_cfg, "compute_final_obs"):
        # Isaac Lab then puts the observation taken before its same-step reset in extras["final_obs"].
        env_cfg.compute_final_obs = True
    if getattr(env_cfg, "seed", 0) is None:
        env_cfg.seed = 0  # a fixed construction seed; episodes are seeded through reset()
    for name in settings.cameras:
        camera = getattr(env_cfg.scene, name, None)
        if camera is None or not hasattr(camera, "data_types"):
            available = [key for key, value in vars(env_cfg.scene).items() if hasattr(value, "data_types")]
            raise ValueError(
                f"env.cameras: {settings.task!r} has no camera sensor {name!r} in its scene; "
                f"cameras there: {available or 'none'}"
            )
        camera.width = camera.height = settings.image_size
    if settings.cameras and getattr(env_cfg, "num_rerenders_on_reset", 1) < 1:
        env_cfg.num_rerenders_on_reset = 1  # images after a reset must show the new episode


def add_lift_success_term(env_cfg: Any) -> None:
    """Adds Isaac Lab's ``object_reached_goal`` (cube within 2 cm of the commanded position)."""
    if getattr(env_cfg.terminations, "object_reached_goal", None) is not None:
        return
    from isaaclab.managers import TerminationTermCfg
    from isaaclab_tasks.manager_based.manipulation.lift import mdp

    env_cfg.terminations.object_reached_goal = TerminationTermCfg(func=mdp.object_reached_goal)
