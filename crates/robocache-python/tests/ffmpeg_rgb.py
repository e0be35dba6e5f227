"""FFmpeg's RGB frames as the tests' oracle, on every CPU.

FFmpeg's swscale converts YUV to RGB with code of its own per CPU: its x86
and C paths are what robocache's conversion equals bit for bit; its aarch64
NEON path rounds differently (up to 3 per channel; measured under qemu on
Debian bullseye arm64 with PyAV 15, where FFmpeg's YUV and robocache's RGB
were both bit-identical to x86's). There the comparison allows that much."""

import platform

import numpy as np

FFMPEG_RGB_TOLERANCE = 0 if platform.machine() in ("x86_64", "AMD64", "i386", "i686") else 3


def same_as_ffmpeg_rgb(ours, ffmpeg):
    """Whether robocache's frame equals FFmpeg's ``rgb24`` one (exactly on x86)."""
    if FFMPEG_RGB_TOLERANCE == 0:
        return np.array_equal(ours, ffmpeg)
    return ours.shape == ffmpeg.shape and int(np.abs(ours.astype(int) - ffmpeg.astype(int)).max()) <= FFMPEG_RGB_TOLERANCE
