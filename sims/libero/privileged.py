"""The privileged state of a LIBERO world: where the task's goal object and its target are.

LIBERO's goal is a BDDL predicate over named objects and regions, e.g. ``(On akita_black_bowl_1
plate_1)`` or ``(In alphabet_soup_1 basket_1_contain_region)``. This module reads the first goal
predicate's object and target from the simulation (runs in the worker, next to robosuite) as the
23 numbers of ``PRIVILEGED_FIELDS``: what a scripted expert (``expert.py``) needs, and what
``vla-rl collect`` stores as ``observation.privileged``.

Boxes are world-frame axis-aligned bounds (metres): an object's (a body) are those of its collision
geoms (every geom of its body tree that collides), a region's (a box site) those of the site. An
argument may be a region (``(Open wooden_cabinet_1_middle_region)``: the "object" is that site). A
predicate with one argument has no target: its target fields are 0.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

PRIVILEGED_FIELDS: tuple[tuple[str, int], ...] = (
    ("object_pos", 3),
    ("object_quat_wxyz", 4),
    ("object_box_lo", 3),
    ("object_box_hi", 3),
    ("target_pos", 3),
    ("target_box_lo", 3),
    ("target_box_hi", 3),
    ("target_is_region", 1),
)
"""Layout of ``obs["privileged"]``: the goal object's body position and orientation (MuJoCo's
w, x, y, z order) and box, and the target's position and box, and whether the target is a region
(1: the object goes *in* it) or an object (0: the object goes *on* it)."""
PRIVILEGED_DIM = sum(size for _, size in PRIVILEGED_FIELDS)

_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)


def goal_arguments(problem_env: Any) -> tuple[str, str | None]:
    """(object, target or None) of the first goal predicate of a LIBERO problem env."""
    predicate = problem_env.parsed_problem["goal_state"][0]
    if len(predicate) < 2:
        raise ValueError(f"LIBERO goal predicate {predicate} names no object")
    return predicate[1], predicate[2] if len(predicate) > 2 else None


def _subtree_collision_geoms(model: Any, root_body: int) -> np.ndarray:
    """Ids of the colliding geoms of ``root_body`` and its descendants."""
    body = model.geom_bodyid.copy()
    in_tree = body == root_body
    # Walk each geom's body up to the world (body 0); a geom is in the tree when the walk meets the root.
    while np.any(body > 0):
        body = np.where(body > 0, model.body_parentid[body], 0)
        in_tree |= body == root_body
    collides = (model.geom_contype != 0) | (model.geom_conaffinity != 0)
    return np.flatnonzero(in_tree & collides)


def _world_box(centers: np.ndarray, half: np.ndarray, xpos: np.ndarray, xmat: np.ndarray) -> np.ndarray:
    """[lo (3), hi (3)] bounding the boxes (local ``centers`` +- ``half``, posed by ``xpos``/``xmat``)."""
    corners = centers[:, None, :] + _CORNERS[None] * half[:, None, :]  # [G, 8, 3]
    world = np.einsum("gij,gkj->gki", xmat.reshape(-1, 3, 3), corners) + xpos[:, None, :]
    return np.concatenate([world.min(axis=(0, 1)), world.max(axis=(0, 1))])


class _Anchor:
    """Where a goal argument is: a body (its subtree's colliding geoms box it) or a site (its own box)."""

    def __init__(self, problem: Any, name: str) -> None:
        model = problem.sim.model._model
        self.body = self.site = None
        if name in problem.obj_body_id:
            self.body = problem.obj_body_id[name]
        else:
            try:
                self.site = model.site(name).id
            except KeyError:
                try:
                    self.body = model.body(name).id
                except KeyError:
                    raise ValueError(f"LIBERO goal argument {name!r}: no object, body or site") from None
        self.geoms = _subtree_collision_geoms(model, self.body) if self.body is not None else None

    def read(self, model: Any, data: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, w-x-y-z quaternion, [box lo, box hi])."""
        if self.body is not None and len(self.geoms) == 0:  # nothing collides: a point at the body
            return data.xpos[self.body], data.xquat[self.body], np.concatenate([data.xpos[self.body]] * 2)
        if self.body is not None:
            aabb = model.geom_aabb[self.geoms]
            box = _world_box(aabb[:, :3], aabb[:, 3:], data.geom_xpos[self.geoms], data.geom_xmat[self.geoms])
            return data.xpos[self.body], data.xquat[self.body], box
        site = [self.site]
        half = model.site_size[site]
        box = _world_box(0 * half, half, data.site_xpos[site], data.site_xmat[site])
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, data.site_xmat[self.site])
        return data.site_xpos[self.site], quat, box


class GoalState:
    """Reads ``PRIVILEGED_FIELDS`` from one LIBERO env; ``refresh`` after every reset (a hard reset
    builds a new MuJoCo model)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.object_name, self.target_name = goal_arguments(env.env)
        self.refresh()

    def refresh(self) -> None:
        problem = self.env.env
        self._object = _Anchor(problem, self.object_name)
        self._target = None if self.target_name is None else _Anchor(problem, self.target_name)

    def read(self) -> np.ndarray:
        """The ``PRIVILEGED_DIM`` numbers (float32) of the current simulation state."""
        sim = self.env.env.sim
        model, data = sim.model._model, sim.data._data
        position, quat, box = self._object.read(model, data)
        target = np.zeros(10)
        if self._target is not None:
            target_position, _, target_box = self._target.read(model, data)
            target = np.concatenate([target_position, target_box, [float(self._target.site is not None)]])
        return np.concatenate([position, quat, box, target]).astype(np.float32)
