#!/usr/bin/env bash
# The portable wheel (`cargo xtask wheel --portable`: zig, manylinux_2_28)
# against the wheel this machine's toolchain builds (`cargo xtask wheel`,
# what `pip install ./crates/robocache-python` makes), on a GPU host, in one
# run:
#   1. each wheel's build_info() (platform, glibc, decoders' assembly);
#   2. the Python test suite on the portable wheel with the GPU required
#      (ROBOCACHE_REQUIRE_CUDA=1: a test that cannot reach the GPU fails);
#   3. cold AV1 decoding through the loader, the two wheels alternated
#      (benches/wheel_ab.py, A = current, B = portable): CPU decoders,
#      16 workers, uint8 frames, no frame cache on the first epoch.
#
#   benches/portable_wheel_gpu.sh CURRENT.whl PORTABLE.whl AV1_ROOT PYDEPS_WHEELS OUT [ROUNDS] [PARTS]
#
# PARTS: "tests ab" (the default), or either alone (1 and its installs always run).
# PYDEPS_WHEELS: a folder of wheels for what the tests import beyond the
# GPU image (pytest and its dependencies, h5py), installed offline.
set -uo pipefail
CURRENT=$1 PORTABLE=$2 ROOT=$3 PYDEPS=$4 OUT=$5 ROUNDS=${6:-3} PARTS=" ${7:-tests ab} "
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
WORK=$(mktemp -d)
status=0
mkdir -p "$OUT"

python3 -m pip install --quiet --no-index --no-deps --target "$WORK/deps" "$PYDEPS"/*.whl || status=1
for side in current portable; do
    wheel=$CURRENT; [ $side = portable ] && wheel=$PORTABLE
    python3 -m pip install --quiet --no-index --no-deps --target "$WORK/$side" "$wheel" || status=1
    echo "== $side: $(basename "$wheel"), $(du -h "$wheel" | cut -f1)"
    PYTHONPATH="$WORK/$side:$WORK/deps" python3 -c '
import json, robocache
b = robocache.build_info()
print(json.dumps({k: b[k] for k in ("platform", "glibc", "cpu_video_decoders_have_assembly", "ptx_archs")}))
print(json.dumps(robocache.info()["cuda"]))' || status=1
done

if [[ $PARTS == *" tests "* ]]; then
echo "== python tests on the portable wheel, GPU required"
(cd "$WORK" && ROBOCACHE_REQUIRE_CUDA=1 PYTHONPATH="$WORK/portable:$WORK/deps" \
    python3 -m pytest -q -rs -p no:cacheprovider "$REPO/crates/robocache-python/tests" > "$OUT/pytest-portable.log" 2>&1) \
    || status=1
tail -3 "$OUT/pytest-portable.log"
fi

if [[ $PARTS == *" ab "* ]]; then
echo "== cold AV1 frames/s: A = current wheel, B = portable wheel, $ROUNDS rounds each"
cd "$HERE" && python3 wheel_ab.py "$CURRENT" "$PORTABLE" --out "$OUT/ab" --deps "$WORK/deps" --rounds "$ROUNDS" \
    --bench "av1: python3 lerobot_loader.py all $ROOT --no-ceilings --backends --robocache-workers 16 --dtypes uint8 --batches 60 --cache-gib 8 --video-decoders cpu --no-defaults" \
    || status=1
fi
rm -rf "$WORK"
exit $status
