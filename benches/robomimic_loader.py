"""robomimic's SequenceDataset + PyTorch DataLoader on the file `robocache bench
loader --keep FILE` wrote, with the same options (step windows, seq_length,
batch, the same low-dimensional keys), timed the way a robomimic training
loop consumes batches (moved to the GPU when there is one). With
--robocache-json it prints the ratio to robocache's loader from the same run.

    robocache bench loader --keep bench.hdf5 --json robocache.json
    python benches/robomimic_loader.py bench.hdf5 --robocache-json robocache.json
"""

import argparse
import json
import sys
import time

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seq-length", type=int, default=16)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--workers", default="0,4", help="DataLoader num_workers values to time")
    parser.add_argument("--robocache-json")
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch
    from torch.utils.data import DataLoader
    import robomimic.utils.obs_utils as ObsUtils
    from robomimic.utils.dataset import SequenceDataset

    obs_keys = ["robot0_eef_pos", "robot0_eef_quat", "gripper_closed"]
    ObsUtils.initialize_obs_modality_mapping_from_dict({"low_dim": obs_keys})
    dataset = SequenceDataset(
        hdf5_path=args.file,
        obs_keys=obs_keys,
        dataset_keys=["actions", "rewards", "dones"],
        frame_stack=1,
        seq_length=args.seq_length,
        pad_frame_stack=True,
        pad_seq_length=True,
        get_pad_mask=True,
        goal_mode=None,
        hdf5_cache_mode="low_dim",  # robomimic's fastest mode for low-dimensional data
        hdf5_use_swmr=True,
        hdf5_normalize_obs=False,
        filter_by_attribute=None,
        load_next_obs=False,
    )
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    results = []
    for workers in [int(w) for w in args.workers.split(",")]:
        loader = DataLoader(
            dataset, batch_size=args.batch, shuffle=True, num_workers=workers, drop_last=True,
            persistent_workers=workers > 0, pin_memory=device.type == "cuda",
        )
        done, started = 0, None
        while done < args.batches + 3:
            for batch in loader:
                batch = {k: (v.to(device, non_blocking=True) if torch.is_tensor(v) else
                             {kk: vv.to(device, non_blocking=True) for kk, vv in v.items()})
                         for k, v in batch.items()}
                if device.type == "cuda":
                    torch.cuda.synchronize()
                done += 1
                if done == 3:
                    started = time.perf_counter()
                if done >= args.batches + 3:
                    break
        seconds = time.perf_counter() - started
        results.append({
            "loader": f"robomimic SequenceDataset + DataLoader(num_workers={workers})",
            "batches_per_s": args.batches / seconds,
            "windows_per_s": args.batches * args.batch / seconds,
            "ms_per_batch": seconds * 1e3 / args.batches,
        })
    shape = {k: tuple(v.shape) for k, v in batch.items() if torch.is_tensor(v)}
    print(f"robomimic batch shapes: {shape}")
    print(f"{'loader':<66} {'batches/s':>10} {'windows/s':>12} {'ms/batch':>10}")
    for r in results:
        print(f"{r['loader']:<66} {r['batches_per_s']:>10.1f} {r['windows_per_s']:>12.0f} {r['ms_per_batch']:>10.2f}")
    if args.robocache_json:
        with open(args.robocache_json) as f:
            ours = json.load(f)
        best_theirs = max(r["batches_per_s"] for r in results)
        print(f"\nrobocache vs the best robomimic configuration ({best_theirs:.1f} batches/s):")
        for r in ours:
            print(f"  {r['backend'][:40]:<40} {r['mode']:<10} {r['batches_per_s']:>10.1f} batches/s  {r['batches_per_s'] / best_theirs:>8.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
