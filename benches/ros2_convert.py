"""A ROS 2 bag converted to a LeRobot root: `robocache convert lerobot` against the
converter people write by hand (rosbags + "the latest message before each camera frame"
+ PIL + pyarrow), on the same bag, same machine, side by side.

The bag (written here by rosbags, MCAP, zstd off): a 480x640 JPEG camera at 30 Hz,
7-joint JointState at 500 Hz, IMU at 200 Hz, commands at 10 Hz, for --seconds.
Both converters write every camera tick's frame and the state and action at that
tick: robocache resampled on a 30 Hz clock (linear, slerp, hold), the baseline by the
latest message before the frame.

--cameras image (the default): frames as PNG, LeRobot's `image` features; the baseline
decodes the JPEGs and encodes PNGs with PIL and writes one parquet file (pyarrow).
--cameras video: frames as video; robocache writes H.264 (`--cameras video`, OpenH264,
g=2), the baseline is LeRobot's own writer (`LeRobotDataset.create(use_videos=True)`,
`add_frame` per camera tick, `save_episode`, `finalize`; lerobot 0.6.1 installed) with
its default encoder (SVT-AV1 through PyAV, g=2, crf 30), or with `--lerobot-vcodec h264`
(FFmpeg's libx264 through PyAV).

    python benches/ros2_convert.py [--seconds 30] [--robocache target/release/robocache] [--only-robocache]
                                   [--cameras image|video] [--lerobot-vcodec libsvtav1|h264]

Prints the bag size, each converter's seconds and MB/s, and the ratio, last. The
issue's target (microsoft/physical-ai-toolchain#38) is under 5 minutes per GB.
"""

import argparse
import bisect
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_bag(path, seconds):
    from PIL import Image
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    T = ts.types
    start = 1_700_000_000_000_000_000
    rng = np.random.default_rng(0)
    # A camera image with texture (JPEG of about 40 KB at quality 90).
    base = (rng.random((480, 640, 3)) * 64).astype(np.uint8) + np.linspace(0, 160, 640, dtype=np.uint8)[None, :, None]

    def stamp(ns):
        return T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)

    def header(ns, frame):
        return T["std_msgs/msg/Header"](stamp=stamp(ns), frame_id=frame)

    messages = []
    for i in range(int(seconds * 30)):
        t = start + int(i * 1e9 / 30) + 4_000_000
        frame = np.roll(base, i * 3, axis=1)
        jpeg = io.BytesIO()
        Image.fromarray(frame).save(jpeg, format="JPEG", quality=90)
        msg = T["sensor_msgs/msg/CompressedImage"](header=header(t, "camera"), format="jpeg",
                                                   data=np.frombuffer(jpeg.getvalue(), np.uint8))
        messages.append(("/camera/image/compressed", "sensor_msgs/msg/CompressedImage", t, msg))
    names = [f"joint_{j}" for j in range(7)]
    for i in range(int(seconds * 500)):
        t = start + int(i * 1e9 / 500)
        msg = T["sensor_msgs/msg/JointState"](header=header(t, "base"), name=names,
                                              position=np.sin(np.arange(7) + i / 500), velocity=np.cos(np.arange(7) + i / 500),
                                              effort=np.zeros(7))
        messages.append(("/joint_states", "sensor_msgs/msg/JointState", t, msg))
    for i in range(int(seconds * 200)):
        t = start + int(i * 1e9 / 200) + 1_000_000
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        msg = T["sensor_msgs/msg/Imu"](
            header=header(t, "imu"), orientation=T["geometry_msgs/msg/Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3]),
            orientation_covariance=np.zeros(9),
            angular_velocity=T["geometry_msgs/msg/Vector3"](x=0.1, y=0.2, z=0.3), angular_velocity_covariance=np.zeros(9),
            linear_acceleration=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=9.8), linear_acceleration_covariance=np.zeros(9))
        messages.append(("/imu", "sensor_msgs/msg/Imu", t, msg))
    for i in range(int(seconds * 10)):
        t = start + int(i * 1e8) + 2_000_000
        layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        messages.append(("/cmd", "std_msgs/msg/Float64MultiArray", t,
                         T["std_msgs/msg/Float64MultiArray"](layout=layout, data=rng.normal(size=7))))
    messages.sort(key=lambda m: m[2])
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {}
        for topic, kind, t, msg in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, kind, typestore=ts)
            writer.write(connections[topic], t, ts.serialize_cdr(msg, kind))


MAPPING = """
fps = 30
[streams."observation.images.camera"]
topic = "/camera/image/compressed"
[streams."observation.state"]
topic = "/joint_states"
field = "position"
joints = ["joint_0", "joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6"]
[streams."observation.imu"]
topic = "/imu"
field = "orientation"
[streams.action]
topic = "/cmd"
field = "data"
"""


def read_latest(bag):
    """Every message of the mapped topics deserialised by rosbags, and the
    lookup of each stream's latest message at or before a time."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    topics = {"/joint_states": [], "/imu": [], "/cmd": [], "/camera/image/compressed": []}
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        for connection, t, raw in reader.messages():
            if connection.topic in topics:
                topics[connection.topic].append((t, reader.deserialize(raw, connection.msgtype)))
    times = {k: [t for t, _ in v] for k, v in topics.items()}

    def latest(topic, t):
        i = bisect.bisect_right(times[topic], t) - 1
        return topics[topic][max(i, 0)][1]

    return topics, latest


def hand_written(bag, out):
    """What a team writes without robocache: every message deserialised, each
    stream's latest message before the camera frame, JPEG decoded and PNG
    encoded with PIL, one parquet file (pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    topics, latest = read_latest(bag)

    rows = {"observation.images.camera": [], "observation.state": [], "observation.imu": [], "action": [], "timestamp": []}
    t0 = times["/camera/image/compressed"][0]
    for t, msg in topics["/camera/image/compressed"]:
        pixels = np.asarray(Image.open(io.BytesIO(bytes(msg.data))).convert("RGB"))
        png = io.BytesIO()
        Image.fromarray(pixels).save(png, format="PNG")
        rows["observation.images.camera"].append({"bytes": png.getvalue(), "path": None})
        rows["observation.state"].append(np.asarray(latest("/joint_states", t).position, np.float32))
        o = latest("/imu", t).orientation
        rows["observation.imu"].append(np.array([o.x, o.y, o.z, o.w], np.float32))
        rows["action"].append(np.asarray(latest("/cmd", t).data, np.float32))
        rows["timestamp"].append((t - t0) / 1e9)
    table = pa.table({k: (v if k != "observation.images.camera" else pa.array(v)) for k, v in rows.items()})
    pathlib.Path(out).mkdir(parents=True)
    pq.write_table(table, pathlib.Path(out) / "data.parquet")
    return len(rows["timestamp"])


def lerobot_writer(bag, out, vcodec):
    """What a team writes with LeRobot: every message deserialised, each stream's
    latest message before the camera frame, the JPEG decoded with PIL, the frame
    given to `LeRobotDataset.add_frame`, the episode saved (video encoded by LeRobot)."""
    from PIL import Image
    from lerobot.configs.video import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    topics, latest = read_latest(bag)

    features = {
        "observation.images.camera": {"dtype": "video", "shape": (480, 640, 3), "names": ["height", "width", "channels"]},
        "observation.state": {"dtype": "float32", "shape": (7,), "names": None},
        "observation.imu": {"dtype": "float32", "shape": (4,), "names": None},
        "action": {"dtype": "float32", "shape": (7,), "names": None},
    }
    dataset = LeRobotDataset.create("bench/ros2", fps=30, features=features, root=out, use_videos=True,
                                    rgb_encoder=RGBEncoderConfig(vcodec=vcodec))
    frames = 0
    for t, msg in topics["/camera/image/compressed"]:
        o = latest("/imu", t).orientation
        dataset.add_frame({
            "observation.images.camera": np.asarray(Image.open(io.BytesIO(bytes(msg.data))).convert("RGB")),
            "observation.state": np.asarray(latest("/joint_states", t).position, np.float32),
            "observation.imu": np.array([o.x, o.y, o.z, o.w], np.float32),
            "action": np.asarray(latest("/cmd", t).data, np.float32),
            "task": "bench",
        })
        frames += 1
    dataset.save_episode()
    dataset.finalize()
    return frames


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--robocache", default="target/release/robocache")
    parser.add_argument("--only-robocache", action="store_true",
                        help="time robocache alone (a bag too large to convert by hand in the time)")
    parser.add_argument("--cameras", choices=["image", "video"], default="image")
    parser.add_argument("--lerobot-vcodec", default="libsvtav1", help="--cameras video: the baseline's encoder")
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="ros2_convert_"))
    try:
        bag = work / "bag"
        started = time.perf_counter()
        write_bag(bag, args.seconds)
        size = sum(f.stat().st_size for f in bag.iterdir())
        print(f"bag: {size / 1e6:.1f} MB, {args.seconds:.0f} s recorded, written in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        (work / "map.toml").write_text(MAPPING)
        started = time.perf_counter()
        subprocess.run([args.robocache, "convert", "lerobot", str(bag), str(work / "robocache_root"), "--map",
                        str(work / "map.toml"), "--task", "bench", "--cameras", args.cameras], check=True,
                       capture_output=True)
        ours = time.perf_counter() - started
        if args.only_robocache:
            print(f"robocache convert lerobot: {ours:.2f} s for {size / 1e6:.1f} MB: "
                  f"{ours / (size / 1e9):.1f} s per GB ({os.cpu_count()} cores)")
            return
        started = time.perf_counter()
        if args.cameras == "image":
            frames = hand_written(bag, work / "hand_root")
            baseline = "rosbags + latest-before + PIL + pyarrow"
        else:
            frames = lerobot_writer(bag, work / "hand_root", args.lerobot_vcodec)
            baseline = f"rosbags + latest-before + LeRobotDataset.add_frame ({args.lerobot_vcodec})"
        theirs = time.perf_counter() - started
        rate = lambda s: size / 1e6 / s  # noqa: E731
        ours_bytes = sum(f.stat().st_size for f in (work / "robocache_root").rglob("*") if f.is_file())
        theirs_bytes = sum(f.stat().st_size for f in (work / "hand_root").rglob("*") if f.is_file())
        print(f"| converter ({args.cameras}) | seconds | MB/s | min per GB | root MB |")
        print(f"|---|---:|---:|---:|---:|")
        print(f"| robocache convert lerobot | {ours:.2f} | {rate(ours):.1f} | {1000 / rate(ours) / 60:.2f} | {ours_bytes / 1e6:.1f} |")
        print(f"| {baseline} | {theirs:.2f} | {rate(theirs):.1f} | {1000 / rate(theirs) / 60:.2f} | {theirs_bytes / 1e6:.1f} |")
        print(f"robocache / hand-written speed: {theirs / ours:.2f}x ({frames} camera frames)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
