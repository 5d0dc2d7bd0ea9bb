"""ROS 2 transport that needs no ROS 2 installation.

ROS 2 (with rmw_cyclonedds_cpp or any DDS middleware) puts each message on a DDS topic as plain
XCDR1 (classic CDR). ``types`` generates matching cyclonedds IDL classes from the message
definitions that ``rosbags`` ships, ``dds`` is a small node over cyclonedds (or rclpy, where it is
installed) and ``robot`` implements the ``Robot`` interface on top of it.
"""
