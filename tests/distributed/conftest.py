import importlib.util
import sys
from pathlib import Path

import pytest

# The tiny chunk-RL run of tests/training/tiny_chunk_rl.py, which the chunk-rank tests reuse.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

DECLARED_GPUS = 4
"""GPUs declared to the test's Ray instance (a CPU machine): placement is Ray's own accounting."""


@pytest.fixture(scope="session")
def ray_runtime():
    if importlib.util.find_spec("ray") is None:
        pytest.skip('needs pip install -e ".[ray]"')
    from vla_rl.distributed.runtime import make_runtime

    runtime = make_runtime("ray", num_cpus=2, num_gpus=DECLARED_GPUS)
    # Test modules are not importable in Ray's worker processes: ship their classes by value.
    for name, module in list(sys.modules.items()):
        if name.startswith("test_") and module is not None:
            runtime.ray.cloudpickle.register_pickle_by_value(module)
    yield runtime
    runtime.shutdown()
