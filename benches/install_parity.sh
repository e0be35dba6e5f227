#!/usr/bin/env bash
# What users install against what the benchmarks measured, on a GPU host,
# in one run: the wheel `pip install ./crates/robocache-python` builds
# (PIP_WHEELS) against the GPU bundle's (`cargo xtask gpu-bundle`,
# BUNDLE_WHEELS), CPU decoders only, on a LeRobot AV1 root and an H.264 root
# that LeRobot 0.6.1 writes here; then "two lines swapped, nothing tuned"
# (robocache.Loader with every default, cold and warm) beside LeRobot's
# loader on the AV1 root. Each wheel's build_info() is printed beside its
# rows.
#
#   benches/install_parity.sh PIP_WHEELS BUNDLE_WHEELS OUT [BATCHES] [PARTS]
#
# PARTS: "parity defaults" (the default), or either alone.
#
# Where the two wheels' native modules are byte-identical (they are since
# the Python package builds stripped, with the decoders' assembly, as the
# bundle does) the script says so and measures the pip wheel alone; a
# missing BUNDLE_WHEELS folder measures the pip wheel alone too.
#
# LeRobot, PyAV and torchcodec must be installed in $LEROBOT_DEPS (from
# `cargo xtask lerobot-wheels`); the roots are written once into
# $LEROBOT_ROOTS and kept for later runs on the same machine.
set -uo pipefail
PIP_WHEELS=$1 BUNDLE_WHEELS=$2 OUT=$3 BATCHES=${4:-60} PARTS=" ${5:-parity defaults} "
HERE=$(cd "$(dirname "$0")" && pwd)
DEPS=${LEROBOT_DEPS:?set LEROBOT_DEPS to the folder LeRobot, PyAV and torchcodec are installed in}
ROOTS=${LEROBOT_ROOTS:-/tmp/lerobot-roots}
WORK=$(mktemp -d)
status=0
mkdir -p "$OUT" "$ROOTS"
# torchcodec loads FFmpeg by sonames: PyAV's wheel carries the libraries.
mkdir -p "$WORK/ffmpeg"
for lib in "$DEPS"/av.libs/lib{avcodec,avdevice,avfilter,avformat,avutil,swresample,swscale}-*; do
  name=$(basename "$lib")
  ln -sf "$lib" "$WORK/ffmpeg/$(echo "$name" | sed -E 's/-[0-9a-f]+\.so\.([0-9]+).*/.so.\1/')"
done
export LD_LIBRARY_PATH=$WORK/ffmpeg:$DEPS/av.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
WHEELS="pip bundle"
for wheel in pip bundle; do
  dir=$PIP_WHEELS; [ "$wheel" = bundle ] && dir=$BUNDLE_WHEELS
  [ -d "$dir" ] || { echo "no $wheel wheel folder ($dir)"; WHEELS=${WHEELS/$wheel/}; continue; }
  python3 -m pip install --quiet --no-index --no-deps --target "$WORK/$wheel" "$dir"/*.whl || status=1
  sha256sum "$WORK/$wheel"/robocache/_native*.so | sed "s|$WORK/||"
  PYTHONPATH=$WORK/$wheel python3 -c "import json, robocache; print('$wheel wheel:', json.dumps(robocache.build_info()['video_decoders']))"
done
# Byte-identical native modules are one build: measured once.
if [ -d "$WORK/pip" ] && [ -d "$WORK/bundle" ] && cmp -s "$WORK"/pip/robocache/_native*.so "$WORK"/bundle/robocache/_native*.so; then
  echo "the two wheels' native modules are byte-identical: measuring the pip wheel"
  WHEELS=pip
fi
for codec in libsvtav1 h264; do
  [ -d "$ROOTS/$codec" ] || PYTHONPATH=$DEPS python3 "$HERE/lerobot_loader.py" write "$ROOTS/$codec" \
    --episodes 6 --frames 200 --vcodec "$codec" || status=1
done
# The wheels side by side, CPU decoders, twice each, alternating.
ROUNDS="1 2"; [ "$(echo $WHEELS)" = pip ] && ROUNDS=1
[[ $PARTS == *" parity "* ]] || ROUNDS=
for round in $ROUNDS; do
  for codec in libsvtav1 h264; do
    for wheel in $WHEELS; do
      echo "== round $round, $codec, the $wheel wheel"
      PYTHONPATH=$WORK/$wheel:$DEPS python3 "$HERE/lerobot_loader.py" all "$ROOTS/$codec" --batches "$BATCHES" \
        --backends --video-decoders cpu --dtypes uint8 --cache-gib 0 --no-defaults \
        --json "$OUT/parity-$codec-$wheel-$round.json" || status=1
    done
  done
done
[[ $PARTS == *" defaults "* ]] && echo "== two lines swapped, nothing tuned: the pip wheel's defaults beside LeRobot's loader (AV1)" &&
PYTHONPATH=$WORK/pip:$DEPS python3 "$HERE/lerobot_loader.py" all "$ROOTS/libsvtav1" --batches "$BATCHES" \
  --workers 8 --backends torchcodec --video-decoders auto --dtypes float32 --cache-gib 0 \
  --json "$OUT/defaults-av1.json" || status=1
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print(f"\n{'codec':<10} {'wheel':<7} {'round':>5} {'robocache cpu frames/s':>23} {'ceiling':>8} {'window':>8}")
for path in sorted(glob.glob(os.path.join(out, "parity-*.json"))):
    codec, wheel, rnd = os.path.basename(path)[7:-5].rsplit("-", 2)
    run = json.load(open(path))
    row = next(r for r in run["rows"] if r["loader"].startswith("robocache.Loader"))
    window = run["window_ceiling"]["frames_per_s"] if run["window_ceiling"] else float("nan")
    print(f"{codec:<10} {wheel:<7} {rnd:>5} {row['frames_per_s']:>23.0f} {run['ceiling']['frames_per_s']:>8.0f} {window:>8.0f}")
path = os.path.join(out, "defaults-av1.json")
if os.path.exists(path):
    print()
    for row in json.load(open(path))["rows"]:
        print(f"{row['loader']:<60} {row['frames_per_s']:>10.0f} frames/s")
PY
rm -rf "$WORK"
exit $status
