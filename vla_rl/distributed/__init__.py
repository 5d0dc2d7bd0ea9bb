"""Workers (env, inference, trainer) as plain classes, run in-process or as Ray actors."""
