"""MuJoCo manipulation tasks (``TASKS`` registry) and scripted policies for them."""
