"""Moved: MetaWorld's expert recorder is ``python -m vla_rl.data.metaworld_collect`` (same arguments).

It writes the data layer's dataset format, so it lives in ``vla_rl.data`` (a simulator backend does
not import the layers above it; see docs/architecture.md)."""

import sys

MOVED_TO = "vla_rl.data.metaworld_collect"

if __name__ == "__main__":
    print(f"python -m vla_rl.sims.metaworld.collect moved: run python -m {MOVED_TO} {' '.join(sys.argv[1:])}")
    sys.exit(2)
raise ImportError(f"vla_rl.sims.metaworld.collect moved to {MOVED_TO}")
