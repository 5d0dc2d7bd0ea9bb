"""Per-episode camera videos: encode uint8 frames to mp4 and decode them back (ffmpeg via imageio)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHROMA_SUBSAMPLED_PIX_FMTS = ("yuv420p", "yuvj420p", "nv12")
"""Pixel formats that halve the chroma resolution and therefore need even frame sizes."""


@dataclass(frozen=True)
class VideoSettings:
    """How camera frames are encoded. The default matches LeRobot's layout with H.264 instead of AV1."""

    codec: str = "libx264"
    """ffmpeg encoder name: ``libx264`` (H.264), ``libx264rgb`` (H.264 in RGB, lossless at crf 0),
    ``libsvtav1`` (AV1, LeRobot's default) ..."""
    pix_fmt: str = "yuv420p"
    """Encoded pixel format; ``yuv420p`` plays everywhere, ``rgb24`` (with ``libx264rgb``) is exact."""
    crf: int = 23
    """Constant rate factor: 0 is lossless for x264, higher is smaller and lossier (x264: 0-51)."""
    preset: str = ""
    """Encoder speed preset (x264: ``ultrafast`` ... ``veryslow``); empty uses the encoder default."""
    keyframe_interval: int = 0
    """Frames from one keyframe to the next (ffmpeg's ``-g``); 0 uses the encoder default (x264: up to
    250). A reader that seeks a frame decodes from the keyframe before it, so small values (LeRobot
    encodes with 2) make random access fast, at the cost of larger files."""

    def __post_init__(self) -> None:
        if self.crf < 0:
            raise ValueError(f"video crf must be >= 0, got {self.crf}")
        if self.keyframe_interval < 0:
            raise ValueError(f"video keyframe_interval must be >= 0, got {self.keyframe_interval}")

    @property
    def codec_name(self) -> str:
        """The codec as LeRobot names it in ``info.json`` (``h264``, ``av1``), not the encoder."""
        return CODEC_NAMES.get(self.codec, self.codec)


CODEC_NAMES: dict[str, str] = {
    "libx264": "h264",
    "libx264rgb": "h264",
    "libopenh264": "h264",
    "libsvtav1": "av1",
    "libaom-av1": "av1",
    "librav1e": "av1",
    "libvpx-vp9": "vp9",
}

LOSSLESS_VIDEO = VideoSettings(codec="libx264rgb", pix_fmt="rgb24", crf=0)
"""Bit-exact RGB round trip (larger files); use it when decoded images must equal the originals."""


def check_video_frames(frames: np.ndarray, settings: VideoSettings, where: str | Path) -> np.ndarray:
    """``frames`` as uint8 [T, H, W, 3] with T >= 1 and, for a chroma-subsampled ``settings.pix_fmt``,
    even H and W; a ``ValueError`` naming ``where`` (the video file) otherwise."""
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"video frames must be uint8 [T, H, W, 3], got {frames.dtype} {frames.shape}")
    if len(frames) == 0:
        raise ValueError(f"cannot write an empty video to {where}")
    height, width = frames.shape[1:3]
    if settings.pix_fmt in CHROMA_SUBSAMPLED_PIX_FMTS and (height % 2 or width % 2):
        raise ValueError(
            f"pixel format {settings.pix_fmt} needs even frame sizes, got {height}x{width}; "
            "use an even image size or a 4:4:4 format such as yuv444p/rgb24"
        )
    return frames


def encoder_params(settings: VideoSettings) -> list[str]:
    """ffmpeg output options of ``settings`` besides the codec and pixel format (rate factor, preset,
    keyframe interval)."""
    params = ["-crf", str(settings.crf)]
    if settings.preset:
        params += ["-preset", settings.preset]
    if settings.keyframe_interval:
        params += ["-g", str(settings.keyframe_interval)]
    return params


def write_video(path: str | Path, frames: np.ndarray, fps: float, settings: VideoSettings) -> None:
    """Encode uint8 frames [T, H, W, 3] into one video file at ``path`` (parents created)."""
    import imageio.v2 as imageio

    frames = check_video_frames(frames, settings, path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(
        str(path),
        frames,
        format="FFMPEG",
        fps=fps,
        codec=settings.codec,
        pixelformat=settings.pix_fmt,
        macro_block_size=1,
        ffmpeg_log_level="error",
        output_params=encoder_params(settings),
    )


def read_video(path: str | Path) -> np.ndarray:
    """All frames of the video at ``path`` as uint8 [T, H, W, 3]."""
    import imageio.v3 as iio

    if not Path(path).is_file():
        raise FileNotFoundError(f"video file {path} does not exist")
    frames = iio.imread(str(path), plugin="FFMPEG", index=None)
    if len(frames) == 0:
        raise ValueError(f"video file {path} has no frames")
    return frames[..., :3]
