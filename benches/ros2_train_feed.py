"""Training straight from ROS 2 bags against training from the LeRobot root
converted from them: batches/s of one robocache.Loader over each, same
windows, same streams, same machine, same run.

    python benches/ros2_train_feed.py [--seconds 20] [--robocache target/release/robocache] [--device cpu]
                                      [--cameras image|video]

The bag is `ros2_convert.py`'s recording (a 480x640 JPEG camera at 30 Hz,
JointState at 500 Hz, IMU at 200 Hz, commands at 10 Hz), converted once by
`robocache convert lerobot` with the same mapping (frames on the 30 Hz clock,
PNG `image` features, or H.264 `video` features with `--cameras video`). Both loaders read time windows at 30 Hz (history 1, horizon 4)
of the camera (resized to 224x224 on the loader's device), the state, the
IMU orientation and the action, batches of 16, the default workers and
frame cache; each is timed over --batches batches after 10 of warm-up,
twice, alternating. The issue's target (47): the bags deliver batches at
the converted root's rate.
"""

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import ros2_convert  # noqa: E402

STREAMS = ["observation.images.camera", "observation.state", "observation.imu", "action"]


def rate(path, mapping, args):
    import robocache

    dataset = robocache.open(path, mapping=mapping) if mapping else robocache.open(path)
    loader = robocache.Loader(dataset, STREAMS, windows={"hz": 30.0, "history": 1, "horizon": 4}, batch_size=16,
                              device=args.device, frame_size=(224, 224), seed=0)
    batches = iter(())
    def next_batch():
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:
            batches = iter(loader)
            return next(batches)
    for _ in range(10):
        next_batch()
    started = time.perf_counter()
    for _ in range(args.batches):
        batch = next_batch()
    seconds = time.perf_counter() - started
    shapes = {k: tuple(batch[k].shape) for k in STREAMS}
    return args.batches / seconds, shapes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--robocache", default="target/release/robocache")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--cameras", choices=["image", "video"], default="image",
                        help="how the converted root stores the camera (`convert lerobot --cameras`)")
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="ros2_feed_"))
    try:
        bag = work / "bag"
        ros2_convert.write_bag(bag, args.seconds)
        mapping = work / "map.toml"
        mapping.write_text(ros2_convert.MAPPING)
        root = work / "root"
        subprocess.run([args.robocache, "convert", "lerobot", str(bag), str(root), "--map", str(mapping),
                        "--task", "bench", "--cameras", args.cameras], check=True, capture_output=True)
        rows = {"bags": [], "converted root": []}
        for _ in range(2):
            for name, (path, bag_mapping) in (("bags", (bag, str(mapping))), ("converted root", (root, None))):
                per_second, shapes = rate(path, bag_mapping, args)
                rows[name].append(per_second)
                print(f"{name}: {per_second:.1f} batches/s {shapes}", flush=True)
        print(f"\n| source | batches/s (two runs) |\n| --- | ---: |")
        for name, runs in rows.items():
            print(f"| {name} | {', '.join(f'{r:.1f}' for r in runs)} |")
        print(f"bags / converted root: {max(rows['bags']) / max(rows['converted root']):.2f} (best runs, {args.device})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
