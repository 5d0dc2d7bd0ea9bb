"""The deployment rehearsal launcher under its original name (``vla_rl.real_world.rehearsal``).

    python -m vla_rl.real_world.ros1.rehearsal --work-dir runs/rehearsal checkpoint=RUN episodes=20

starts ``roscore``, ``vla-rl sim-robot`` and ``vla-rl deploy`` (or, with ``robot.transport=ros2``,
the last two over DDS); see ``vla_rl.real_world.rehearsal``.
"""

from __future__ import annotations

import sys

from vla_rl.real_world.rehearsal import (
    main,
    ros2_environment,
    ros_environment,
    run_rehearsal,
    transport_of,
    wait_for_port,
)

__all__ = ["main", "ros2_environment", "ros_environment", "run_rehearsal", "transport_of", "wait_for_port"]

if __name__ == "__main__":
    sys.exit(main())
