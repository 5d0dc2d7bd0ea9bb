"""Scene assembly with ``mujoco.MjSpec``: robot + table + lights + cameras + task objects."""

from __future__ import annotations

import mujoco
import numpy as np
from vla_rl.robots.panda import RobotDescription

TABLE_CONTYPE = 1
TABLE_CONAFFINITY = 3
"""Objects and the table collide with each other (bit 1) and with the gripper (bit 2)."""
RENDER_SLICES = 12
RENDER_STACKS = 6
SCENE_CAMERAS: dict[str, tuple[np.ndarray, np.ndarray]] = {
    "front": (np.array([1.2, 0.0, 0.5]), np.array([0.5, 0.0, 0.12])),
    "top": (np.array([0.75, 0.0, 0.8]), np.array([0.5, 0.0, 0.0])),
}
"""Fixed cameras of the scene: name -> (position, point looked at). ``top`` is a steep view from
above the far edge of the table: the arm reaches in from the other side, so it hides less of the
table than the front view does."""


def look_at_quat(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Quaternion of a MuJoCo camera at ``eye`` looking at ``target`` with world z up."""
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    mat = np.column_stack([right, up, -forward])  # camera looks along its -z
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, mat.flatten())
    return quat


def new_scene_spec(robot: RobotDescription, physics_dt_s: float, image_size: int) -> mujoco.MjSpec:
    """Robot on a table with lights, ``front`` and ``top`` cameras and a ``tcp_pos`` sensor (first
    sensor)."""
    spec = mujoco.MjSpec.from_file(str(robot.xml_path))
    spec.option.timestep = physics_dt_s
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.visual.global_.offwidth = max(image_size, 64)
    spec.visual.global_.offheight = max(image_size, 64)
    # Coarser tessellation of capsules and cylinders: half the CPU render cost at 64x64 pixels
    # (MuJoCo's defaults are 28 slices, 16 stacks), with no visible difference at that size.
    spec.visual.quality.numslices = RENDER_SLICES
    spec.visual.quality.numstacks = RENDER_STACKS
    world = spec.worldbody
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0.8, 0.8, 0.02],
        pos=[0.4, 0.0, 0.0],
        rgba=[0.6, 0.57, 0.54, 1.0],
        contype=TABLE_CONTYPE,
        conaffinity=TABLE_CONAFFINITY,
        friction=[1.0, 0.005, 0.0001],
    )
    world.add_light(
        name="key", pos=[0.6, -0.6, 1.6], dir=[-0.1, 0.4, -1.0], diffuse=[0.7, 0.7, 0.7], castshadow=True
    )
    world.add_light(
        name="fill", pos=[0.6, 0.8, 1.2], dir=[0.0, -0.5, -1.0], diffuse=[0.3, 0.3, 0.3], castshadow=False
    )
    for name, (pos, target) in SCENE_CAMERAS.items():
        world.add_camera(name=name, pos=pos, quat=look_at_quat(pos, target), fovy=45.0)
    spec.add_sensor(
        name="tcp_pos",
        type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
        objtype=mujoco.mjtObj.mjOBJ_SITE,
        objname=robot.tcp_site_name,
    )
    return spec


def add_cube(
    spec: mujoco.MjSpec, name: str, half_size_m: float, rgba: list[float], mass_kg: float = 0.05
) -> None:
    """A free cube with a ``<name>_pos`` framepos sensor; it starts off-table until a reset places it."""
    body = spec.worldbody.add_body(name=name, pos=[0.5, 0.0, half_size_m])
    body.add_freejoint(name=f"{name}_joint")
    body.add_geom(
        name=f"{name}_geom",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[half_size_m] * 3,
        rgba=rgba,
        mass=mass_kg,
        contype=TABLE_CONTYPE,
        conaffinity=TABLE_CONAFFINITY,
        condim=4,
        friction=[1.0, 0.01, 0.0005],
    )
    spec.add_sensor(
        name=f"{name}_pos",
        type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
        objtype=mujoco.mjtObj.mjOBJ_BODY,
        objname=name,
    )


def add_marker(
    spec: mujoco.MjSpec, name: str, geom_type: mujoco.mjtGeom, size: list[float], rgba: list[float]
) -> mujoco.MjsBody:
    """A non-colliding mocap marker (targets, pads); its pose lives in ``data.mocap_pos``."""
    body = spec.worldbody.add_body(name=name, mocap=True, pos=[0.5, 0.0, 0.0])
    body.add_geom(name=f"{name}_geom", type=geom_type, size=size, rgba=rgba, contype=0, conaffinity=0)
    return body


def add_stem(body: mujoco.MjsBody, length_m: float, radius_m: float, rgba: list[float]) -> None:
    """A thin vertical rod hanging below ``body`` (visual only).

    A point in the air seen by one camera is ambiguous along the viewing ray; the rod meets the
    table at the point's xy, so one image shows where the point is. Whatever reaches below the
    opaque table is hidden.
    """
    body.add_geom(
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        size=[radius_m, length_m / 2, 0.0],
        pos=[0.0, 0.0, -length_m / 2],
        rgba=rgba,
        contype=0,
        conaffinity=0,
    )


def place_free_body(
    model: mujoco.MjModel, data: mujoco.MjData, joint_name: str, pos: np.ndarray, yaw_rad: float
) -> None:
    """Set a free joint's position and yaw (rotation about world z), at rest."""
    joint = model.joint(joint_name)
    qadr, vadr = joint.qposadr[0], joint.dofadr[0]
    data.qpos[qadr : qadr + 3] = pos
    data.qpos[qadr + 3 : qadr + 7] = (np.cos(yaw_rad / 2), 0.0, 0.0, np.sin(yaw_rad / 2))
    data.qvel[vadr : vadr + 6] = 0.0
