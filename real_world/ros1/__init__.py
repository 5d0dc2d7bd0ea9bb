"""ROS 1 transport: the robot interface over rospy and the simulated robot as a ROS node.

rospy comes from the system's ROS packages (Debian: ``ros-core python3-rospy python3-sensor-msgs
python3-std-msgs python3-trajectory-msgs``; ``make ros`` installs them), not from PyPI, so it is
imported from the system's ``dist-packages`` on first use.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

SYSTEM_PACKAGES = "/usr/lib/python3/dist-packages"
INSTALL_HINT = (
    "ROS 1 (rospy) is not importable: install the system packages with `make ros` "
    "(apt-get install ros-core python3-rospy python3-sensor-msgs python3-std-msgs python3-trajectory-msgs)"
)


def import_rospy() -> ModuleType:
    """rospy, with the system's ROS packages appended to ``sys.path`` (after the virtualenv's own,
    so they never shadow what the project installed)."""
    try:
        return importlib.import_module("rospy")
    except ImportError:
        if SYSTEM_PACKAGES not in sys.path:
            sys.path.append(SYSTEM_PACKAGES)
        try:
            return importlib.import_module("rospy")
        except ImportError as error:
            raise ImportError(INSTALL_HINT) from error
