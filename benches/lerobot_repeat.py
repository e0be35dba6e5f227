"""NVDEC loaders over a LeRobot root one after the other in one process:
the first float32 loader of a process grows the device pool to its batches
in flight, the later ones find it grown (docs/benchmarks.md, "H.264: frames
converted on the GPU").

    python3 lerobot_repeat.py ROOT --batches 300 --dtypes float32 float32 uint8 float32 uint8
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lerobot_loader as ll  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root")
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--prefetch", type=int, default=32)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float32", "uint8", "float32", "uint8"],
                        choices=["float32", "uint8"])
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    import torch
    import robocache

    torch.zeros(1, device=args.device)
    rows = []
    for dtype in args.dtypes:
        loader = robocache.Loader(args.root, None, delta_timestamps=ll.deltas(30), batch_size=ll.BATCH, shuffle=True,
                                  workers=args.workers, prefetch=args.prefetch, device=args.device, drop_last=True,
                                  return_uint8=dtype == "uint8", frame_cache_bytes=0)  # every batch decodes
        result = ll.timed(args.batches, 3, lambda: ll.epochs(loader, args.device, 0), ll.BATCH * 4)
        del loader
        torch.cuda.synchronize()
        rows.append((dtype, result["frames_per_s"], result["cores_busy"]))
        print(rows[-1], flush=True)
    for run, (dtype, fps, cores) in enumerate(rows):
        print(f"run {run}: {dtype:>8} {fps:>9.0f} frames/s {cores:>5.1f} cores")


if __name__ == "__main__":
    main()
