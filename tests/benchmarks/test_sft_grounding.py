import numpy as np
from vla_rl.sims.tasks.pick_place import PickPlaceTask

from benchmarks.sft_grounding import PRIVILEGED, pointed_cube


def test_pointed_cube_picks_the_cube_in_the_direction_of_motion():
    width = sum(size for _, size in PickPlaceTask.privileged_fields)
    privileged = np.zeros((2, width))
    # Cubes at (+1, 0), (0, +1), (-1, 0) m; the gripper at the origin; cube 1 is named.
    cubes = np.array([[1.0, 0.0, 0.02], [0.0, 1.0, 0.02], [-1.0, 0.0, 0.02]])
    privileged[:, PRIVILEGED["cubes_pos"]] = cubes.reshape(-1)
    privileged[:, PRIVILEGED["cube_onehot"]] = [0.0, 1.0, 0.0]
    privileged[:, PRIVILEGED["tcp_to_cube"]] = cubes[1]  # cube 1 minus the gripper at 0
    # Moving along -x points at cube 2; moving mostly along +y (slightly +x) at cube 1.
    actions_xy = np.array([[-0.5, 0.1], [0.2, 0.9]])
    assert pointed_cube(actions_xy, privileged).tolist() == [2, 1]
