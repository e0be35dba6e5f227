"""LeRobot roots robocache writes with camera video, read by FFmpeg (PyAV):
every frame of every episode decodes, the same pixels as robocache's own
reader gives, and consecutive IDR pictures (the last of one episode's
encoder run, the first of the next's) carry different ``idr_pic_id``
(H.264 7.4.3), read by a slice-header parser written here from the spec."""

import json
import pathlib

import numpy as np
import pytest

import robocache
from ffmpeg_rgb import same_as_ffmpeg_rgb


LENGTHS = [1, 1, 3, 2, 5, 1, 4, 3]


class Bits:
    """An RBSP bit reader (emulation prevention bytes removed)."""

    def __init__(self, data):
        out, zeros = bytearray(), 0
        for b in data:
            if zeros >= 2 and b == 3:
                zeros = 0
                continue
            out.append(b)
            zeros = zeros + 1 if b == 0 else 0
        self.data, self.at = bytes(out), 0

    def u(self, n):
        v = 0
        for _ in range(n):
            v = (v << 1) | ((self.data[self.at >> 3] >> (7 - (self.at & 7))) & 1)
            self.at += 1
        return v

    def ue(self):
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
        return (1 << zeros) - 1 + self.u(zeros)


def idr_pic_ids(path):
    """Per picture of an MP4's H.264 track: its idr_pic_id, or None for a non-IDR picture."""
    av = pytest.importorskip("av")
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        extradata = bytes(stream.codec_context.extradata)  # avcC
        sps = extradata[8:8 + int.from_bytes(extradata[6:8], "big")]
        b = Bits(sps[1:])
        assert b.u(8) == 66, "the writer writes Constrained Baseline"
        b.u(16), b.ue()
        log2_max_frame_num = b.ue() + 4
        if b.ue() == 0:
            b.ue()
        b.ue(), b.u(1), b.ue(), b.ue()
        assert b.u(1) == 1, "frames only"
        ids = []
        for packet in container.demux(stream):
            data, at = bytes(packet), 0
            while at < len(data):
                n = int.from_bytes(data[at:at + 4], "big")
                nal, at = data[at + 4:at + 4 + n], at + 4 + n
                if nal[0] & 31 in (1, 5):
                    s = Bits(nal[1:])
                    s.ue(), s.ue(), s.ue(), s.u(log2_max_frame_num)
                    ids.append(s.ue() if nal[0] & 31 == 5 else None)
                    break
    return ids


@pytest.fixture(scope="module")
def camera_file(tmp_path_factory):
    h5py = pytest.importorskip("h5py")
    path = tmp_path_factory.mktemp("cameras") / "demo.hdf5"
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_kwargs": {"control_freq": 10}})
        for i, n in enumerate(LENGTHS):
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo["actions"] = rng.normal(size=(n, 2)).astype("f4")
            # Smooth pictures that move: the encoder's P-frames have work to do.
            y, x = np.mgrid[0:48, 0:64]
            frames = [((np.stack([x + 3 * k + i, y + 2 * k, x + y + 5 * i], -1) * 3) % 256) for k in range(n)]
            demo["obs/cam"] = np.asarray(frames, dtype="u1")
    return path


@pytest.mark.parametrize("every", [1, 2, 3])
def test_a_written_video_decodes_in_ffmpeg_frame_for_frame_and_its_idrs_differ(camera_file, tmp_path, every):
    av = pytest.importorskip("av")
    root = tmp_path / "root"
    robocache.open(camera_file).to_lerobot(root, fps=10.0, cameras="video", key_frame_every=every)
    (video,) = sorted(root.rglob("*.mp4"))
    ids = idr_pic_ids(video)
    assert len(ids) == sum(LENGTHS)
    assert [k for k in range(1, len(ids)) if ids[k] is not None and ids[k] == ids[k - 1]] == [], ids
    with av.open(str(video)) as container:
        ffmpeg = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(ffmpeg) == sum(LENGTHS)
    loader = robocache.Loader(root, ["obs/cam"], delta_timestamps={}, batch_size=64, shuffle=False, rank=0,
                              world_size=1, device="cpu", return_uint8=True, frame_cache_bytes=0)
    (batch,) = list(loader)
    ours = np.asarray(batch["obs/cam"]).transpose(0, 2, 3, 1)
    assert ours.shape == (sum(LENGTHS), 48, 64, 3)
    for k, (a, b) in enumerate(zip(ours, ffmpeg)):
        assert same_as_ffmpeg_rgb(a, b), f"frame {k}: robocache's reader and FFmpeg differ"
