"""Many episodes back to back in one video file (LeRobot v3.0's video shards), through ffmpeg.

A shard is filled by one running ffmpeg process (``VideoStream``): each episode's frames are piped to
it as they come and encoded as one continuous stream, so adding an episode costs the same however long
the file already is, and frame ``k`` of the file is shown at ``k / fps`` seconds. The file is written
under a ``.partial`` name and moved into place by ``finish``, once ffmpeg has closed it; an episode is
read back by seeking to its first frame (the decoder starts at the keyframe before it).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

from vla_rl.data.lerobot_v3_layout import partial_path
from vla_rl.data.video import VideoSettings, check_video_frames, encoder_params


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


class VideoStream:
    """One mp4 file being filled: ``add`` pipes uint8 frames [T, H, W, 3] to an ffmpeg process that
    encodes them with ``settings`` as they come; ``finish`` ends the stream and moves the file to
    ``path``; ``discard`` stops ffmpeg and removes the file (finished or not). Every ``add`` must bring
    frames of the first one's size."""

    def __init__(self, path: Path, fps: float, settings: VideoSettings) -> None:
        self.path = path
        self.partial = partial_path(path)
        self.fps = fps
        self.settings = settings
        self.frames_written = 0
        """Frames sent to the encoder so far; the next episode starts at this frame."""
        self._frame_shape: tuple[int, ...] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None
        """The open ``.partial`` file, which ffmpeg writes into."""
        self.finished = False
        """Whether ``finish`` moved the file to ``path``."""
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the stream is
        """ffmpeg's error output (a file, not a pipe: a full pipe would stall ffmpeg)."""

    def _start(self, height: int, width: int) -> subprocess.Popen[bytes]:
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        # the file is created here and ffmpeg writes into it through /dev/fd: if this process dies and
        # a resumed writer removes the .partial name and starts a file of that name, the orphaned ffmpeg
        # can only finish the old (unlinked) file, never touch the new one
        self._fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fps = Fraction(self.fps).limit_denominator()
        command = [_ffmpeg(), "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24"]
        command += ["-s", f"{width}x{height}", "-r", str(fps), "-i", "-", "-an"]
        command += ["-vcodec", self.settings.codec, "-pix_fmt", self.settings.pix_fmt]
        command += [*encoder_params(self.settings), "-f", "mp4", f"file:/dev/fd/{self._fd}"]
        # its own session: a Ctrl+C meant for the collection does not cut the file short
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            pass_fds=(self._fd,),
            start_new_session=True,
        )

    def add(self, frames: np.ndarray) -> int:
        """Encode ``frames`` after those already sent; returns the index of their first frame in the file."""
        frames = np.ascontiguousarray(check_video_frames(frames, self.settings, self.path))
        if self._frame_shape is None:
            self._frame_shape = frames.shape[1:]
            self._process = self._start(*frames.shape[1:3])
        elif frames.shape[1:] != self._frame_shape:
            raise ValueError(
                f"{self.path}: frames of shape {frames.shape[1:]}, the file holds {self._frame_shape}"
            )
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(memoryview(frames).cast("B"))
            self._process.stdin.flush()  # to ffmpeg now, to be encoded while the caller goes on
        except BrokenPipeError as error:
            raise RuntimeError(
                f"ffmpeg stopped while encoding {self.partial}: {self._error_output()}"
            ) from error
        first = self.frames_written
        self.frames_written += len(frames)
        return first

    def size_mb(self) -> float:
        """What ffmpeg has written of the file so far, in MiB (the encoder holds a few frames back)."""
        return os.fstat(self._fd).st_size / 2**20 if self._fd is not None else 0.0

    def finish(self) -> None:
        """Encode the frames held back, close the file and move it to ``path`` (atomically)."""
        if self._process is None:
            raise RuntimeError(f"no frames were sent to {self.path}")
        assert self._process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # ffmpeg already stopped: its exit code says why
            self._process.stdin.close()
        if self._process.wait() != 0:
            raise RuntimeError(f"ffmpeg could not write {self.partial}: {self._error_output()}")
        os.replace(self.partial, self.path)
        self.finished = True
        self._close_files()

    def discard(self) -> None:
        """Stop ffmpeg and remove the file (at ``path`` once finished: no reader may count on it yet)."""
        if self.finished:
            self.path.unlink(missing_ok=True)
            return
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self.partial.unlink(missing_ok=True)
        self._close_files()

    def _close_files(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._log.close()

    def _error_output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()


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
