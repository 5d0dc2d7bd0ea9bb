"""Real-world deployment (ROS bridge, robot interface, safety layer): added in a later release."""
