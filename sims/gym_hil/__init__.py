"""gym-hil's Panda tasks (HIL-SERL's simulator), stepped in a worker process of the venv that has gym-hil."""
