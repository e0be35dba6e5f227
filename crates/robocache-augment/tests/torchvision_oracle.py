"""torchvision v2's functional operations, the oracle of robocache's
augmentation: reads a JSON job from stdin, writes JSON to stdout.

Job `apply`: {"frame": [H*W*3 floats, HWC], "size": [W, H], "crop": null or
[left, top, width, height, out_w, out_h], "ops": [[name, params...], ...]}
-> {"frame": [...], "size": [W', H']}: the crop (resized_crop, antialias)
then each operation in order, on a float32 CHW tensor.

Job `lerobot_subsets`: {"weights": [...], "n_subset": k, "random_order":
bool, "draws": n} -> {"counts": {"i,j,k": count}}: LeRobot's
RandomSubsetApply choice (torch.multinomial without replacement, sorted
unless random_order), n times.
"""

import json
import sys

import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as F


def apply(job):
    width, height = job["size"]
    image = torch.tensor(job["frame"], dtype=torch.float32).reshape(height, width, 3).permute(2, 0, 1).contiguous()
    if job["crop"] is not None:
        left, top, w, h, out_w, out_h = job["crop"]
        image = F.resized_crop(image, top, left, h, w, [out_h, out_w], antialias=True)
    for op in job["ops"]:
        name, args = op[0], op[1:]
        if name == "brightness":
            image = F.adjust_brightness(image, args[0])
        elif name == "contrast":
            image = F.adjust_contrast(image, args[0])
        elif name == "saturation":
            image = F.adjust_saturation(image, args[0])
        elif name == "hue":
            image = F.adjust_hue(image, args[0])
        elif name == "sharpness":
            image = F.adjust_sharpness(image, args[0])
        elif name == "gamma":
            image = F.adjust_gamma(image, args[0])
        elif name == "affine":
            angle, tx, ty, scale, mode = args
            interpolation = InterpolationMode.NEAREST if mode == "nearest" else InterpolationMode.BILINEAR
            image = F.affine(image, angle=angle, translate=[tx, ty], scale=scale, shear=[0.0, 0.0],
                             interpolation=interpolation, fill=0)
        elif name == "blur":
            kx, ky, sx, sy = args
            image = F.gaussian_blur(image, [kx, ky], [sx, sy])
        else:
            raise ValueError(f"unknown op {name}")
    out_h, out_w = image.shape[-2:]
    return {"frame": image.permute(1, 2, 0).reshape(-1).tolist(), "size": [out_w, out_h]}


def lerobot_subsets(job):
    torch.manual_seed(0)
    p = torch.tensor(job["weights"], dtype=torch.float64)
    counts = {}
    for _ in range(job["draws"]):
        chosen = torch.multinomial(p, job["n_subset"])
        if not job["random_order"]:
            chosen = chosen.sort().values
        key = ",".join(str(int(i)) for i in chosen)
        counts[key] = counts.get(key, 0) + 1
    return {"counts": counts}


def main():
    jobs = json.load(sys.stdin)
    out = []
    for job in jobs:
        out.append(apply(job) if job["job"] == "apply" else lerobot_subsets(job))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
