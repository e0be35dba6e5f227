"""Every message of a ROS 2 bag decoded: robocache against rosbags and the
`mcap` Python reader (mcap-ros2-support), on the same bag, same machine, in
one process. robocache runs twice: on one thread, and with the bag's chunks
side by side on every core (`bag_decode`'s default); rosbags and mcap read on
one thread, as they run.

The bag (written here by rosbags, MCAP, no chunk compression): the recording
of issue 47, two 480x640 JPEG cameras at 30 Hz, a 7-joint JointState at
500 Hz, an IMU at 200 Hz and `/tf` (two transforms) at 100 Hz, for --seconds.

    python benches/ros2_decode.py [--seconds 60] [--bag PATH] [--rounds 3]

Decoding means: every message of every topic deserialised from its CDR bytes
with the definitions the bag carries, into the reader's own values:
- robocache: `robocache.bag_decode` (the reflection decoder the streams are
  read with; `robocache inspect BAG --decode`), `threads=1` and the default;
- rosbags: `AnyReader(...).messages()` and `reader.deserialize(raw, msgtype)`
  for each (its typestore built from the bag's definitions);
- mcap: `make_reader(..., decoder_factories=[mcap_ros2 DecoderFactory()])`
  and `iter_decoded_messages()`.
Each is timed over the whole bag (file reads included), best of --rounds;
prints messages/s and MB/s of serialised bytes, and the ratios, last.
"""

import argparse
import io
import os
import pathlib
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
    base = (rng.random((480, 640, 3)) * 64).astype(np.uint8) + np.linspace(0, 160, 640, dtype=np.uint8)[None, :, None]
    # 30 distinct JPEGs per camera (quality 90), cycled: decoding CDR does not
    # look at the pixels, and encoding thousands would dominate the setup.
    jpegs = []
    for k in range(30):
        out = io.BytesIO()
        Image.fromarray(np.roll(base, k * 7, axis=1)).save(out, format="JPEG", quality=90)
        jpegs.append(np.frombuffer(out.getvalue(), np.uint8))

    def stamp(ns):
        return T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)

    def header(ns, frame):
        return T["std_msgs/msg/Header"](stamp=stamp(ns), frame_id=frame)

    messages = []
    for camera, shift in (("/cam_high/image/compressed", 0), ("/cam_wrist/image/compressed", 15)):
        for i in range(int(seconds * 30)):
            t = start + int(i * 1e9 / 30) + 4_000_000 + shift * 1000
            msg = T["sensor_msgs/msg/CompressedImage"](header=header(t, camera), format="jpeg",
                                                       data=jpegs[(i + shift) % len(jpegs)])
            messages.append((camera, "sensor_msgs/msg/CompressedImage", t, msg))
    names = [f"joint_{j}" for j in range(7)]
    for i in range(int(seconds * 500)):
        t = start + int(i * 1e9 / 500)
        msg = T["sensor_msgs/msg/JointState"](header=header(t, "base"), name=names,
                                              position=np.sin(np.arange(7) + i / 500),
                                              velocity=np.cos(np.arange(7) + i / 500), effort=np.zeros(7))
        messages.append(("/joint_states", "sensor_msgs/msg/JointState", t, msg))
    for i in range(int(seconds * 200)):
        t = start + int(i * 1e9 / 200) + 1_000_000
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        msg = T["sensor_msgs/msg/Imu"](
            header=header(t, "imu"), orientation=T["geometry_msgs/msg/Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3]),
            orientation_covariance=np.zeros(9),
            angular_velocity=T["geometry_msgs/msg/Vector3"](x=0.1, y=0.2, z=0.3),
            angular_velocity_covariance=np.zeros(9),
            linear_acceleration=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=9.8),
            linear_acceleration_covariance=np.zeros(9))
        messages.append(("/imu", "sensor_msgs/msg/Imu", t, msg))
    for i in range(int(seconds * 100)):
        t = start + int(i * 1e7) + 3_000_000
        transforms = []
        for parent, child, x in (("world", "base", 0.0), ("base", "tool", 0.1 * np.sin(i / 100))):
            transforms.append(T["geometry_msgs/msg/TransformStamped"](
                header=header(t, parent), child_frame_id=child,
                transform=T["geometry_msgs/msg/Transform"](
                    translation=T["geometry_msgs/msg/Vector3"](x=x, y=0.0, z=0.5),
                    rotation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))))
        messages.append(("/tf", "tf2_msgs/msg/TFMessage", t, T["tf2_msgs/msg/TFMessage"](transforms=transforms)))
    messages.sort(key=lambda m: m[2])
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {}
        for topic, kind, t, msg in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, kind, typestore=ts)
            writer.write(connections[topic], t, ts.serialize_cdr(msg, kind))


def bag_file(bag):
    bag = pathlib.Path(bag)
    return next(bag.glob("*.mcap")) if bag.is_dir() else bag


def decode_robocache(bag, threads=None):
    import robocache

    topics = robocache.bag_decode(bag, threads=threads)
    failed = [t for t in topics if t["error"]]
    if failed:
        raise SystemExit(f"robocache did not decode: {failed}")
    return sum(t["messages"] for t in topics), sum(t["bytes"] for t in topics)


def decode_rosbags(bag):
    from rosbags.highlevel import AnyReader

    messages = size = 0
    with AnyReader([pathlib.Path(bag)]) as reader:
        for connection, _, raw in reader.messages():
            reader.deserialize(raw, connection.msgtype)
            messages += 1
            size += len(raw)
    return messages, size


def decode_mcap(bag):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    messages = size = 0
    with open(bag_file(bag), "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _, _, message, decoded in reader.iter_decoded_messages():
            messages += 1
            size += len(message.data)
    return messages, size


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--bag", help="decode this bag instead of writing one")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bag = args.bag
        if bag is None:
            bag = os.path.join(tmp, "recording")
            started = time.perf_counter()
            write_bag(bag, args.seconds)
            print(f"wrote {bag} in {time.perf_counter() - started:.1f} s")
        size_mb = sum(p.stat().st_size for p in pathlib.Path(bag).rglob("*") if p.is_file()) / 1e6 \
            if os.path.isdir(bag) else os.path.getsize(bag) / 1e6
        rows = []
        readers = (("robocache", decode_robocache), ("robocache-1", lambda bag: decode_robocache(bag, threads=1)),
                   ("rosbags", decode_rosbags), ("mcap", decode_mcap))
        for name, decode in readers:
            best = None
            for _ in range(args.rounds):
                started = time.perf_counter()
                messages, size = decode(bag)
                seconds = time.perf_counter() - started
                best = seconds if best is None else min(best, seconds)
            rows.append((name, messages, size, best))
            print(f"{name}: {messages} messages, {size / 1e6:.1f} MB in {best:.3f} s", flush=True)
        counts = {messages for _, messages, _, _ in rows}
        if len(counts) != 1:
            raise SystemExit(f"the readers decoded different numbers of messages: {rows}")
        print(f"\nbag: {size_mb:.1f} MB on disk, {rows[0][1]} messages, best of {args.rounds}")
        print(f"robocache: every core ({os.cpu_count()}); robocache-1: one thread")
        print(f"{'reader':<12} {'seconds':>8} {'messages/s':>12} {'MB/s':>9} {'robocache is':>13} {'robocache-1 is':>15}")
        ours, ours_one = rows[0][3], rows[1][3]
        for name, messages, size, seconds in rows:
            print(f"{name:<12} {seconds:>8.3f} {messages / seconds:>12.0f} {size / 1e6 / seconds:>9.1f} "
                  f"{seconds / ours:>12.1f}x {seconds / ours_one:>14.1f}x")


if __name__ == "__main__":
    main()
