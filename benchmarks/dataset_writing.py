"""LeRobot dataset writing: seconds per episode for v2.1 and v3.0, side by side, as a dataset grows.

Both writers get the same episodes (``--frames`` frames, one ``--image-size`` camera, the default H.264
video, the state, privileged state, action and reward columns ``vla-rl collect`` records) in one
process, alternating which writes first, so the host's load falls on both alike. The time of an episode
is its ``add_episode`` call (for v3.0 that includes the finalise it runs every
``--finalize-every`` episodes); ``close`` is timed apart. Then each version writes the same episodes
again in a process of its own, to count the CPU seconds of the writer and of its ffmpeg children (v3.0's
encoder runs beside the caller, so wall time alone could hide work).

    nice -n 15 python -m benchmarks.dataset_writing [--episodes 300] [--frames 100] [--image-size 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine_line
from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_format import dataset_writer

VERSIONS = ("v2.1", "v3.0")
EDGE_EPISODES = 50
"""The first and last this many episodes are compared: their medians' ratio says whether the cost grows."""


def make_episode(number: int, frames: int, image_size: int) -> Episode:
    """A deterministic episode: a square moving over a gradient (video that compresses like a scene
    does, unlike noise) and random low-dimensional columns."""
    rng = np.random.default_rng(number)
    y, x = np.mgrid[0:image_size, 0:image_size]
    images = np.empty((frames, image_size, image_size, 3), np.uint8)
    for t in range(frames):
        images[t, ..., 0] = (x * 2 + t) % 256
        images[t, ..., 1] = (y * 2 + 3 * number) % 256
        images[t, ..., 2] = 90
        top, left = (t + number) % (image_size - 8), (2 * t) % (image_size - 8)
        images[t, top : top + 8, left : left + 8] = (230, 40, 40)
    return Episode(
        images={"front": images},
        proprio=rng.normal(size=(frames, 9)).astype(np.float32),
        actions=rng.uniform(-1, 1, (frames, 4)).astype(np.float32),
        instruction=f"task {number % 3}",
        success=True,
        rewards=rng.random(frames).astype(np.float32),
        privileged=rng.normal(size=(frames, 20)).astype(np.float32),
    )


def writer_kwargs(version: str, finalize_every: int) -> dict[str, object]:
    return {"finalize_every_episodes": finalize_every} if version == "v3.0" else {}


def side_by_side(args: argparse.Namespace, folder: Path) -> dict[str, dict[str, object]]:
    """Both versions in this process, episode by episode: seconds of each ``add_episode``, of ``close``."""
    writers = {
        version: dataset_writer(
            folder / version, 10.0, version, **writer_kwargs(version, args.finalize_every)
        )
        for version in VERSIONS
    }
    seconds: dict[str, list[float]] = {version: [] for version in VERSIONS}
    for number in range(args.episodes):
        episode = make_episode(number, args.frames, args.image_size)
        order = VERSIONS if number % 2 == 0 else VERSIONS[::-1]
        for version in order:
            start = time.perf_counter()
            writers[version].add_episode(episode)
            seconds[version].append(time.perf_counter() - start)
        if (number + 1) % 50 == 0:
            print(f"  {number + 1} episodes", flush=True)
    results: dict[str, dict[str, object]] = {}
    for version in VERSIONS:
        start = time.perf_counter()
        writers[version].close()
        results[version] = {"add_episode_s": seconds[version], "close_s": time.perf_counter() - start}
    return results


def cpu_seconds(args: argparse.Namespace, version: str, folder: Path) -> dict[str, float]:
    """CPU seconds (user + system) of a process that writes the episodes with ``version``, its ffmpeg
    children included, and its wall seconds."""
    command = [sys.executable, "-m", "benchmarks.dataset_writing", "--only", version, "--output", str(folder)]
    command += ["--episodes", str(args.episodes), "--frames", str(args.frames)]
    command += ["--image-size", str(args.image_size), "--finalize-every", str(args.finalize_every)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def write_only(args: argparse.Namespace) -> None:
    """``--only VERSION``: write the episodes with one version; print as JSON the CPU seconds of this
    process inside ``add_episode`` and ``close``, those of its ffmpeg children, and the wall seconds."""
    writer_cpu_s = wall_s = 0.0
    writer = dataset_writer(
        Path(args.output) / args.only, 10.0, args.only, **writer_kwargs(args.only, args.finalize_every)
    )
    for number in range(args.episodes + 1):
        episode = make_episode(number, args.frames, args.image_size) if number < args.episodes else None
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        if episode is None:
            writer.close()
        else:
            writer.add_episode(episode)
        writer_cpu_s += time.process_time() - cpu_start
        wall_s += time.perf_counter() - wall_start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "writer_cpu_s": writer_cpu_s,
                "ffmpeg_cpu_s": children.ru_utime + children.ru_stime,
                "wall_s": wall_s,
            }
        )
    )


def summary(seconds: list[float]) -> dict[str, float]:
    first, last = seconds[:EDGE_EPISODES], seconds[-EDGE_EPISODES:]
    thirds = np.array_split(np.asarray(seconds), 3)
    return {
        "median_s": statistics.median(seconds),
        "first_median_s": statistics.median(first),
        "last_median_s": statistics.median(last),
        "last_over_first": statistics.median(last) / statistics.median(first),
        "mean_by_third_s": [float(part.mean()) for part in thirds],
        "max_s": max(seconds),
        "total_s": sum(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--frames", type=int, default=100, help="frames per episode")
    parser.add_argument("--image-size", type=int, default=64, help="camera image height and width (pixels)")
    parser.add_argument("--finalize-every", type=int, default=50, help="v3.0: episodes between finalises")
    parser.add_argument("--only", choices=VERSIONS, help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.only:
        write_only(args)
        return
    print(f"machine: {machine_line()}")
    print(
        f"{args.episodes} episodes of {args.frames} frames, one {args.image_size}x{args.image_size} camera "
        f"(H.264, crf 23), v3.0 finalised every {args.finalize_every} episodes"
    )
    with tempfile.TemporaryDirectory(prefix="dataset_writing_") as tmp:
        timed = side_by_side(args, Path(tmp) / "side_by_side")
        cpu = {version: cpu_seconds(args, version, Path(tmp) / "cpu") for version in VERSIONS}
    rows = {
        version: {**summary(timed[version]["add_episode_s"]), "close_s": timed[version]["close_s"]}
        for version in VERSIONS
    }
    header = f"{'':6}{'median':>9}{'first 50':>10}{'last 50':>9}{'last/first':>11}"
    print(f"\n{header}   mean by third (s)        max     close")
    for version, row in rows.items():
        thirds = " ".join(f"{value:.3f}" for value in row["mean_by_third_s"])
        print(
            f"{version:6}{row['median_s']:9.3f}{row['first_median_s']:10.3f}{row['last_median_s']:9.3f}"
            f"{row['last_over_first']:11.2f}   {thirds:24} {row['max_s']:.3f}  {row['close_s']:.3f}"
        )
    finalising = timed["v3.0"]["add_episode_s"][args.finalize_every - 1 :: args.finalize_every]
    print("v3.0 episodes that finalised (s): " + " ".join(f"{value:.3f}" for value in finalising))
    print("\nEach version alone, per episode (add_episode and close): CPU seconds and wall seconds")
    for version, counts in cpu.items():
        total = counts["writer_cpu_s"] + counts["ffmpeg_cpu_s"]
        print(
            f"{version:6} writer {counts['writer_cpu_s'] / args.episodes:.3f}  "
            f"ffmpeg {counts['ffmpeg_cpu_s'] / args.episodes:.3f}  total {total / args.episodes:.3f}  "
            f"wall {counts['wall_s'] / args.episodes:.3f}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": machine_line(),
                    "args": vars(args),
                    "rows": rows,
                    "cpu": cpu,
                    "seconds": {v: timed[v]["add_episode_s"] for v in VERSIONS},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
