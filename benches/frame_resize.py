"""Camera frames to a policy's input on the GPU: robocache.convert_frames
(crop, Pillow's bilinear resize, channels first, float32) against what a
PyTorch user writes for the same step, on the same frames, in one process.

A batch is N RGB uint8 frames [N, 480, 640, 3] on the GPU (a LeRobot batch
of 64 windows x 2 cameras x 2 frames is 256), cropped to the centre
480x480 and resized to 224x224, float32 [N, 3, 224, 224] in [0, 1]:

- robocache: ``convert_frames(frames, (224, 224), crop=(0, 80, 480, 480),
  layout="chw", dtype="float32")`` (the loader runs the same two launches
  after its YUV conversion);
- torch: ``F.interpolate(frames.permute(0, 3, 1, 2)[..., 80:560].float() / 255,
  (224, 224), mode="bilinear", antialias=True)`` (the float path), and
  torchvision's ``v2.functional.resize`` of the uint8 crop with
  ``antialias=True``, then ``/ 255`` (the uint8 path).

The floor is the bytes each robocache launch reads and writes over the
device's copy bandwidth (measured here by a device-to-device copy).

    python3 frame_resize.py --frames 256 --json out.json
"""
import argparse
import json
import statistics


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=256)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--size", type=int, nargs=2, default=[224, 224])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--json")
    args = parser.parse_args()
    import numpy as np
    import torch
    import torch.nn.functional as F

    import robocache

    device = torch.device(args.device)
    n, h, w = args.frames, args.height, args.width
    out_h, out_w = args.size
    side = min(h, w)
    crop = ((h - side) // 2, (w - side) // 2, side, side)
    top, left = crop[0], crop[1]
    rng = np.random.default_rng(0)
    frames = torch.from_numpy(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)).to(device)

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    # The copy bandwidth: read + write of 1 GiB.
    block = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    other = torch.empty_like(block)
    copy_ms = timed(lambda: other.copy_(block))
    bandwidth = 2 * block.numel() / (copy_ms / 1e3)
    del block, other

    def robocache_rgb():
        return robocache.convert_frames(frames, (out_h, out_w), crop=crop, layout="chw", dtype="float32")

    def robocache_layout_only():
        return robocache.convert_frames(frames, layout="chw", dtype="float32")

    def torch_float():
        x = frames.permute(0, 3, 1, 2)[:, :, top:top + side, left:left + side].float() / 255.0
        return F.interpolate(x, size=(out_h, out_w), mode="bilinear", antialias=True, align_corners=False)

    def torch_layout_only():
        return frames.permute(0, 3, 1, 2).float() / 255.0

    rows = []
    ours = timed(robocache_rgb)
    # Bytes of the two launches: the rows pass reads the crop's rows whole
    # (each run of a row) and writes rows x out_w; the columns pass reads
    # those and writes float32.
    rows_bytes = n * side * w * 3 + n * side * out_w * 3
    columns_bytes = n * side * out_w * 3 + n * 3 * out_h * out_w * 4
    floor = (rows_bytes + columns_bytes) / bandwidth * 1e3
    rows.append(("robocache convert_frames (crop + resize, chw f32)", ours, floor))
    layout_bytes = n * h * w * 3 * (1 + 4)
    layout_ms = timed(robocache_layout_only)
    rows.append(("robocache convert_frames (chw f32, no resize)", layout_ms, layout_bytes / bandwidth * 1e3))
    layout_base = timed(torch_layout_only)
    rows.append(("torch: permute, float, / 255 (no resize)", layout_base, layout_bytes / bandwidth * 1e3))
    base_float = timed(torch_float)
    rows.append(("torch: float, F.interpolate antialias", base_float, None))
    try:
        from torchvision.transforms.v2 import functional as TF

        def torchvision_uint8():
            x = frames.permute(0, 3, 1, 2)[:, :, top:top + side, left:left + side]
            return TF.resize(x, [out_h, out_w], antialias=True).float() / 255.0

        base_uint8 = timed(torchvision_uint8)
        rows.append(("torchvision: uint8 resize antialias, then float", base_uint8, None))
        # How far torchvision's uint8 resize is from Pillow's (robocache's).
        tv = TF.resize(frames.permute(0, 3, 1, 2)[:, :, top:top + side, left:left + side], [out_h, out_w],
                       antialias=True)
        ours_u8 = robocache.convert_frames(frames, (out_h, out_w), crop=crop, layout="chw")
        diff = (tv.int() - ours_u8.int()).abs()
        agreement = {"max_level_difference": int(diff.max()), "pixels_differing": float((diff > 0).float().mean())}
    except ImportError:
        base_uint8, agreement = None, None

    best_base = min(t for t in (base_float, base_uint8) if t is not None)
    print(f"device: {torch.cuda.get_device_name(device)}, copy bandwidth {bandwidth / 1e9:.0f} GB/s, "
          f"{n} frames {w}x{h} -> crop {side}x{side} -> {out_w}x{out_h}")
    print(f"{'path':58} {'ms':>8} {'floor ms':>9} {'of floor':>9} {'vs torch':>9}")
    for name, ms, floor_ms in rows:
        of_floor = f"{floor_ms / ms:.2f}" if floor_ms else "-"
        # Each robocache row against the fastest torch code for the same step.
        base = layout_base if "no resize" in name else best_base
        speedup = f"{base / ms:.1f}x" if name.startswith("robocache") else "-"
        print(f"{name:58} {ms:8.3f} {floor_ms or 0:9.3f} {of_floor:>9} {speedup:>9}")
    if agreement:
        print(f"torchvision uint8 vs Pillow's resize: max {agreement['max_level_difference']} level(s), "
              f"{100 * agreement['pixels_differing']:.2f}% of values differ")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "bandwidth": bandwidth, "agreement": agreement}, f, indent=1)


if __name__ == "__main__":
    main()
