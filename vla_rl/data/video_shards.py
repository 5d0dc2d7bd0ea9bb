"""Many episodes back to back in one video file (LeRobot v3.0's video shards), through ffmpeg.

An episode's video is encoded on its own (``vla_rl.data.video.write_video``) and appended to the
shard by stream copy (no re-encoding), so frame ``k`` of the shard keeps the timestamp ``k / fps``;
an episode is read back by seeking to its first frame.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def append_video(shard: Path, episode_video: Path) -> None:
    """Append ``episode_video`` to the end of ``shard`` (same codec and size) by stream copy; ``shard`` is
    replaced atomically, and ``episode_video`` is removed. A missing ``shard`` becomes ``episode_video``."""
    shard.parent.mkdir(parents=True, exist_ok=True)
    if not shard.is_file():
        os.replace(episode_video, shard)
        return
    tmp = shard.with_name(shard.name + ".tmp.mp4")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=shard.parent, delete=False) as listing:
        for path in (shard, episode_video):
            quoted = str(path.resolve()).replace("'", r"'\''")
            listing.write(f"file '{quoted}'\n")
    command = [_ffmpeg(), "-y", "-loglevel", "error", "-f", "concat", "-safe", "0", "-i", listing.name]
    command += ["-c", "copy", "-map", "0:v", str(tmp)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"ffmpeg could not append {episode_video} to {shard}: {result.stderr.strip()}")
        os.replace(tmp, shard)
        episode_video.unlink()
    finally:
        Path(listing.name).unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def read_video_frames(path: Path, first_frame: int, num_frames: int, fps: float) -> np.ndarray:
    """Frames ``first_frame`` .. ``first_frame + num_frames - 1`` of the video at ``path`` (frame ``k`` shown
    at ``k / fps`` seconds) as uint8 [num_frames, H, W, 3]."""
    import imageio_ffmpeg

    if not path.is_file():
        raise FileNotFoundError(f"video file {path} does not exist")
    if first_frame < 0 or num_frames <= 0:
        raise ValueError(f"bad frame range: first {first_frame}, count {num_frames}")
    # half a frame before the first one: the frame shown at first_frame / fps is the first one at or after
    # the seek point, whatever the rounding of the container's time base
    start_s = max(first_frame - 0.5, 0.0) / fps
    reader = imageio_ffmpeg.read_frames(
        str(path),
        pix_fmt="rgb24",
        input_params=["-ss", f"{start_s:.6f}"],
        output_params=["-frames:v", str(num_frames)],
    )
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(data, np.uint8).reshape(height, width, 3) for data in reader]
    if len(frames) != num_frames:
        raise ValueError(
            f"{path}: {len(frames)} frames from frame {first_frame} on, expected {num_frames} "
            f"(the video holds fewer frames than its metadata says)"
        )
    return np.stack(frames)
