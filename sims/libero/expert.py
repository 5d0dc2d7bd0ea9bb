"""A scripted pick-and-place expert for LIBERO's ``On``/``In`` goals, from the privileged state.

It acts on what ``obs`` holds (``proprio`` and ``privileged``, see ``privileged.py``) and keeps no
memory, so it stays right across autoresets. Each step it decides where the hand should go:

1. not holding the object: over the grasp point at a travel height, down to a hover height and
   to the grasp point (gripper open), then close; a whole grasp that drifts off-centre on the way
   down goes back up to the hover height to correct it;
2. holding it: up until the object's bottom clears the target by ``CARRY_CLEARANCE_M``, across
   until the object is over the target's centre, then down until it rests just above the target;
3. the object low over the target: open the gripper, and rise once the fingers have let go.

The grasp point: objects that fit between the fingers (their extent along the finger axis, world
y, is under ``FITS_BETWEEN_FINGERS_M``) are taken by their middle, near the top, the hand pointing
down with the fingers along world y (LIBERO's reset pose); wider ones (the bowls of LIBERO-Spatial)
by the rim of the side facing the robot (-x), the hand turned a quarter so the fingers close across
the rim (nearer the robot than the -y rim: a far bowl stays within the arm's reach). An object that
starts above the carry height (on a cabinet) keeps its height until it is over the target.

The actions are robosuite's OSC_POSE deltas in [-1, 1] (``ACTION_DIM`` of ``env.py``): 1 is 5 cm of
position or 0.5 rad of rotation per control step.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial.transform import Rotation
from vla_rl.sims.libero.privileged import PRIVILEGED_FIELDS

STATE_FIELDS = (("eef_pos", 3), ("eef_axis_angle", 3), ("gripper_qpos", 2))
"""Layout of ``obs["proprio"]`` (``worker.PROPRIO_DIM``)."""
ACTION_NAMES = ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")
"""The 7 action dimensions: end-effector position and axis-angle rotation deltas, gripper."""
MAX_STEP_M = 0.05
"""Hand displacement of a full position action (robosuite's OSC_POSE ``output_max``)."""
MAX_TURN_RAD = 0.5
"""Rotation of a full rotation action."""
OPEN, CLOSED = -1.0, 1.0
HAND_DOWN = Rotation.from_rotvec([np.pi, 0.0, 0.0])
"""End-effector orientation the expert holds: pointing down, fingers closing along world y."""
FITS_BETWEEN_FINGERS_M = 0.07
"""Objects narrower than this along y are grasped whole (the Panda hand opens to 8 cm)."""
GRASP_BELOW_TOP_M = 0.025
"""How far below an object's top the fingers close (whole grasps)."""
GRASP_ABOVE_BOTTOM_M = 0.008
"""The lowest a whole grasp goes above the object's bottom (flat objects)."""
RIM_INSET_M = 0.004
"""Rim grasps: the finger centre this far inside the object's -x edge (the side facing the robot) ..."""
RIM_BELOW_TOP_M = 0.025
"""... and this far below its top ..."""
RIM_YAW_RAD = np.pi / 2
"""... with the hand turned a quarter about the vertical, so that the fingers close across the rim."""
HOVER_M = 0.08
"""Height above the grasp point from which the hand descends."""
TRAVEL_M = 0.15
"""Height above the grasp point at which the hand travels while far from it (clear of neighbours)."""
NEAR_M = 0.03
"""Horizontal distance to the grasp point under which the hand comes down to ``HOVER_M``."""
ALIGNED_M = 0.01
"""Horizontal error under which the hand goes down (to grasp, or to place)."""
AT_GRASP_M = 0.012
"""Distance to the grasp point at which the gripper closes."""
HELD_MAX_OPENING_M = 0.004
"""Holding: the fingers are stopped this much wider than the part they grasp, at most ..."""
HELD_MIN_OPENING_M = 0.003
"""... and not closed on nothing."""
HELD_NEAR_M = 0.04
"""Holding: the hand is within this distance of the grasp point."""
RIM_WIDTH_M = 0.02
"""Finger opening that counts as gripping a bowl's rim."""
CARRY_CLEARANCE_M = 0.06
"""While carrying, the object's bottom stays this far above the target's top."""
RELEASE_ABOVE_M = 0.015
"""The object is let go when its bottom is this close above its resting height."""
POSITION_GAIN = 1.0
ROTATION_GAIN = 0.5


def split_privileged(privileged: np.ndarray) -> dict[str, np.ndarray]:
    """``obs["privileged"]`` [N, 23] -> its named fields."""
    out, start = {}, 0
    for name, size in PRIVILEGED_FIELDS:
        out[name] = privileged[:, start : start + size]
        start += size
    return out


def _grasp(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grasp point [N, 3], finger opening when gripping [N], rim grasp [N] bool) from the object boxes."""
    centre = (lo + hi) / 2
    width_y = hi[:, 1] - lo[:, 1]
    whole = width_y < FITS_BETWEEN_FINGERS_M
    whole_z = np.maximum(hi[:, 2] - GRASP_BELOW_TOP_M, lo[:, 2] + GRASP_ABOVE_BOTTOM_M)
    whole_point = np.stack([centre[:, 0], centre[:, 1], whole_z], axis=1)
    rim_point = np.stack([lo[:, 0] + RIM_INSET_M, centre[:, 1], hi[:, 2] - RIM_BELOW_TOP_M], axis=1)
    point = np.where(whole[:, None], whole_point, rim_point)
    return point, np.where(whole, width_y, RIM_WIDTH_M), ~whole


def _rest_height(target_lo: np.ndarray, target_hi: np.ndarray, is_region: np.ndarray) -> np.ndarray:
    """Height of the object's bottom when placed: on top of an object, on the floor of a region."""
    return np.where(is_region, target_lo[:, 2], target_hi[:, 2])


def pick_place_action(proprio: np.ndarray, privileged: np.ndarray) -> np.ndarray:
    """Actions [N, 7] for observations ``proprio`` [N, 8] and ``privileged`` [N, 23] (numpy)."""
    p = split_privileged(privileged.astype(np.float64))
    hand = proprio[:, :3].astype(np.float64)
    opening = proprio[:, 6] - proprio[:, 7]
    lo, hi = p["object_box_lo"], p["object_box_hi"]
    grasp, held_width, rim = _grasp(lo, hi)
    is_region = p["target_is_region"][:, 0] > 0.5
    rest = _rest_height(p["target_box_lo"], p["target_box_hi"], is_region)
    target_xy = (p["target_box_lo"][:, :2] + p["target_box_hi"][:, :2]) / 2
    object_xy = (lo[:, :2] + hi[:, :2]) / 2

    holding = (
        (opening < held_width + HELD_MAX_OPENING_M)
        & (opening > HELD_MIN_OPENING_M)
        & (np.linalg.norm(hand - grasp, axis=1) < HELD_NEAR_M)
    )
    over_target = np.linalg.norm(object_xy - target_xy, axis=1) < ALIGNED_M
    low_enough = lo[:, 2] < rest + RELEASE_ABOVE_M
    placed = over_target & low_enough

    # 1. reach and grasp
    xy_error = np.linalg.norm(hand[:, :2] - grasp[:, :2], axis=1)
    above_grasp = grasp + np.array([0.0, 0.0, HOVER_M])
    travel = grasp + np.array([0.0, 0.0, TRAVEL_M])
    # Near: fix the horizontal error, then go down. Rim grasps fix it at the current height (within
    # hover .. grasp): the hand is beside the bowl, nothing under the fingers. Whole grasps back off
    # to the hover height: a hand that came down off-centre rests its fingertips on the object.
    correct_z = np.where(rim, np.clip(hand[:, 2], grasp[:, 2], above_grasp[:, 2]), above_grasp[:, 2])
    correct = np.column_stack([grasp[:, :2], correct_z])
    goal = np.where((xy_error < ALIGNED_M)[:, None], grasp, correct)
    goal = np.where((xy_error > NEAR_M)[:, None], travel, goal)
    # Far and low: straight up first, so the fingers do not sweep through things.
    low_and_far = (xy_error > NEAR_M) & (hand[:, 2] < above_grasp[:, 2] - 0.02)
    goal = np.where(low_and_far[:, None], np.column_stack([hand[:, :2], travel[:, 2]]), goal)
    gripper = np.where(np.linalg.norm(hand - grasp, axis=1) < AT_GRASP_M, CLOSED, OPEN)

    # 2. carry: the hand moves by what the object must move
    carry_bottom = np.maximum(rest, p["target_box_hi"][:, 2]) + CARRY_CLEARANCE_M
    rise = np.column_stack([hand[:, :2], hand[:, 2] + carry_bottom - lo[:, 2]])
    # Objects that start higher than the carry height (on a cabinet) keep their height across.
    across_z = hand[:, 2] + np.maximum(carry_bottom - lo[:, 2], 0.0)
    across = np.column_stack([hand[:, :2] + target_xy - object_xy, across_z])
    down = np.column_stack([across[:, :2], hand[:, 2] + rest + RELEASE_ABOVE_M / 2 - lo[:, 2]])
    carry = np.where(
        over_target[:, None], down, np.where((lo[:, 2] < carry_bottom - 0.01)[:, None], rise, across)
    )
    goal = np.where(holding[:, None], carry, goal)
    gripper = np.where(holding, CLOSED, gripper)

    # 3. release, then rise: the hand stays put until the fingers have let go (rising while they
    # still grip lifts the object off again)
    up = np.column_stack([hand[:, :2], hand[:, 2] + np.where(holding, 0.0, 0.05)])
    goal = np.where(placed[:, None], up, goal)
    gripper = np.where(placed, OPEN, gripper)

    move = np.clip(POSITION_GAIN * (goal - hand) / MAX_STEP_M, -1.0, 1.0)
    current = Rotation.from_rotvec(proprio[:, 3:6].astype(np.float64))
    yaw = np.where(rim, RIM_YAW_RAD, 0.0)
    wanted = Rotation.from_rotvec(np.column_stack([np.zeros((len(yaw), 2)), yaw])) * HAND_DOWN
    turn = (wanted * current.inv()).as_rotvec()
    turn = np.clip(ROTATION_GAIN * turn / MAX_TURN_RAD, -1.0, 1.0)
    return np.column_stack([move, turn, gripper]).astype(np.float32)


class LiberoExpert:
    """The pick-and-place expert for a batch of worlds; ``act`` mirrors the other backends' experts.

    ``noise_std`` adds Gaussian noise (normalised action units) to the position part of the executed
    action, for more varied demonstrations; the clean action is returned alongside.
    """

    def __init__(self, noise_std: float = 0.0, seed: int = 0) -> None:
        if noise_std < 0:
            raise ValueError(f"noise_std must not be negative, got {noise_std}")
        self.noise_std = noise_std
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(executed action, clean expert action), both float32 [N, 7] in [-1, 1]."""
        clean = pick_place_action(obs["proprio"].cpu().numpy(), obs["privileged"].cpu().numpy())
        executed = clean.copy()
        if self.noise_std > 0:
            executed[:, :3] += self.rng.normal(0.0, self.noise_std, size=(len(executed), 3))
            executed = np.clip(executed, -1.0, 1.0)
        return torch.from_numpy(executed), torch.from_numpy(clean)
