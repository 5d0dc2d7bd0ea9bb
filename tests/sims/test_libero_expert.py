"""The LIBERO pick-and-place expert's decisions on hand-made states, worked out by hand.

Pure maths (no LIBERO needed); the expert on the real scenes is ``benchmarks.libero_expert`` and
``test_libero_collect.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation
from vla_rl.sims.libero.expert import LiberoExpert, pick_place_action
from vla_rl.sims.libero.privileged import PRIVILEGED_DIM

OPEN_FINGERS = (0.039, -0.039)
"""Finger joints of the open hand: 7.8 cm apart."""
DOWN = (np.pi, 0.0, 0.0)
"""End-effector axis-angle of the hand pointing down, fingers along world y."""
BASKET = ((0.3, 0.3, 0.0), (0.4, 0.4, 0.14), 1.0)
"""A region target: box 0.3 .. 0.4 in x and y, floor at z 0, top 0.14."""
CAN = ((0.1, -0.02, 0.0), (0.14, 0.02, 0.08))
"""A 4 cm wide, 8 cm tall object: grasped whole at (0.12, 0, 0.08 - 0.025) = (0.12, 0, 0.055)."""


def state(hand, fingers, obj_box, target=BASKET, axis_angle=DOWN):
    """One world's (proprio [1, 8], privileged [1, 23])."""
    proprio = np.array([[*hand, *axis_angle, *fingers]], dtype=np.float32)
    lo, hi = np.array(obj_box[0]), np.array(obj_box[1])
    target_lo, target_hi, is_region = target
    centre = (np.array(target_lo) + np.array(target_hi)) / 2
    privileged = np.concatenate(
        [(lo + hi) / 2, [1, 0, 0, 0], lo, hi, centre, target_lo, target_hi, [is_region]]
    )[None].astype(np.float32)
    assert privileged.shape == (1, PRIVILEGED_DIM)
    return proprio, privileged


def test_far_from_the_object_the_open_hand_heads_for_the_travel_point_above_it():
    # travel point = grasp + 0.15 m = (0.12, 0, 0.205); error (0.12, 0, -0.095) / 5 cm, clipped
    action = pick_place_action(*state((0.0, 0.0, 0.3), OPEN_FINGERS, CAN))
    np.testing.assert_allclose(action[0], [1, 0, -1, 0, 0, 0, -1], atol=1e-6)


def test_at_the_grasp_point_the_gripper_closes():
    # 5 mm above the grasp point: under 12 mm, so close; the hand keeps going down 5 mm / 5 cm = 0.1
    action = pick_place_action(*state((0.12, 0.0, 0.06), OPEN_FINGERS, CAN))
    np.testing.assert_allclose(action[0], [0, 0, -0.1, 0, 0, 0, 1], atol=1e-5)


def test_off_centre_over_a_whole_grasp_the_hand_backs_off_to_the_hover_height():
    # 2 cm off in x (between 1 and 3 cm), 1 cm above the grasp point (0.12, 0, 0.055): go to
    # (0.12, 0, 0.055 + 0.08): error (0.02, 0, 0.07) / 5 cm = (0.4, 0, 1.4) -> z clipped to 1
    action = pick_place_action(*state((0.10, 0.0, 0.065), OPEN_FINGERS, CAN))
    np.testing.assert_allclose(action[0], [0.4, 0, 1, 0, 0, 0, -1], atol=1e-5)


def test_off_centre_beside_a_bowl_rim_the_hand_corrects_at_its_height():
    # rim grasp (0.004, 0, 0.925); hand 2 cm off in x at 0.94 (within grasp .. hover): keep 0.94,
    # error (0.02, 0, 0) / 5 cm = 0.4; already turned a quarter about z, so no rotation
    bowl = ((0.0, -0.05, 0.9), (0.1, 0.05, 0.95))
    plate = ((0.3, 0.3, 0.9), (0.4, 0.4, 0.92), 0.0)
    turned = (Rotation.from_rotvec([0, 0, np.pi / 2]) * Rotation.from_rotvec(DOWN)).as_rotvec()
    action = pick_place_action(*state((-0.016, 0.0, 0.94), OPEN_FINGERS, bowl, plate, tuple(turned)))
    np.testing.assert_allclose(action[0], [0.4, 0, 0, 0, 0, 0, -1], atol=1e-5)


def test_holding_it_low_the_hand_lifts_it_clear_of_the_target():
    # fingers 4.2 cm apart on a 4 cm object: held. Its bottom (0) must reach 0.14 + 0.06: straight up
    action = pick_place_action(*state((0.12, 0.0, 0.055), (0.021, -0.021), CAN))
    np.testing.assert_allclose(action[0], [0, 0, 1, 0, 0, 0, 1], atol=1e-6)


def test_holding_it_high_the_hand_carries_it_over_the_target_centre():
    # object 0.21 high (above 0.20): across by what the object must move, (0.23, 0.35) / 5 cm, clipped
    lifted = ((0.1, -0.02, 0.21), (0.14, 0.02, 0.29))
    action = pick_place_action(*state((0.12, 0.0, 0.265), (0.021, -0.021), lifted))
    np.testing.assert_allclose(action[0], [1, 1, 0, 0, 0, 0, 1], atol=1e-6)


def test_low_over_the_target_it_opens_the_fingers_in_place():
    # object centred on the basket, bottom 1 cm above its floor (under 1.5 cm), fingers still on it
    # (4.2 cm apart on 4 cm): open without moving, or the rising hand would lift it off again
    placed = ((0.33, 0.33, 0.01), (0.37, 0.37, 0.09))
    action = pick_place_action(*state((0.35, 0.35, 0.065), (0.021, -0.021), placed))
    np.testing.assert_allclose(action[0], [0, 0, 0, 0, 0, 0, -1], atol=1e-6)


def test_once_the_fingers_have_let_go_the_hand_rises():
    # fingers 5 cm apart on the 4 cm object (over 4 + 0.4 cm): no longer holding; up 5 cm, open
    placed = ((0.33, 0.33, 0.01), (0.37, 0.37, 0.09))
    action = pick_place_action(*state((0.35, 0.35, 0.065), (0.025, -0.025), placed))
    np.testing.assert_allclose(action[0], [0, 0, 1, 0, 0, 0, -1], atol=1e-6)


def test_a_bowl_too_wide_for_the_fingers_is_taken_by_the_robot_side_rim_with_the_hand_turned():
    # 10 cm wide: rim grasp at (lo_x + 4 mm, centre y, top - 2.5 cm) = (0.004, 0, 0.925), the hand
    # turned a quarter about z: rotation error pi/2, half of it per step over 0.5 rad -> clipped to 1
    bowl = ((0.0, -0.05, 0.9), (0.1, 0.05, 0.95))
    plate = ((0.3, 0.3, 0.9), (0.4, 0.4, 0.92), 0.0)
    action = pick_place_action(*state((0.004, 0.0, 1.0), OPEN_FINGERS, bowl, plate))
    np.testing.assert_allclose(action[0], [0, 0, -1, 0, 0, 1, -1], atol=1e-5)


def test_noise_moves_only_the_executed_position_and_keeps_the_clean_label():
    proprio, privileged = state((0.0, 0.0, 0.3), OPEN_FINGERS, CAN)
    obs = {
        "proprio": torch.from_numpy(proprio).repeat(4, 1),
        "privileged": torch.from_numpy(privileged).repeat(4, 1),
    }
    executed, clean = LiberoExpert(noise_std=0.5, seed=3).act(obs)
    torch.testing.assert_close(clean, torch.tensor([[1, 0, -1, 0, 0, 0, -1]] * 4, dtype=torch.float32))
    assert torch.equal(executed[:, 3:], clean[:, 3:])
    assert not torch.equal(executed[:, :3], clean[:, :3])
    assert executed.abs().max() <= 1.0
    with pytest.raises(ValueError, match="noise_std must not be negative"):
        LiberoExpert(noise_std=-0.1)
