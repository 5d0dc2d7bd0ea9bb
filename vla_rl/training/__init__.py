"""Training loop, checkpoints, logging and evaluation."""

from vla_rl.training.checkpoint import Checkpoint, load_checkpoint, resolve_checkpoint_dir, save_checkpoint
from vla_rl.training.evaluate import EvalResult, evaluate
from vla_rl.training.runner import Trainer, TrainResult

__all__ = [
    "Checkpoint",
    "EvalResult",
    "TrainResult",
    "Trainer",
    "evaluate",
    "load_checkpoint",
    "resolve_checkpoint_dir",
    "save_checkpoint",
]
