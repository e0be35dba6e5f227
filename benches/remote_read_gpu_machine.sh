#!/usr/bin/env bash
# benches/remote_read.py on the GPU machine (no Rust, no network there), run
# from the repository root in three device calls, each carrying one folder
# (a call carries at most 64 MiB), back to back while the machine stays warm:
#   write  carry target/lerobot-wheels (LEROBOT_WHEELS of xtask/src/cuda_tools.rs):
#          a LeRobot root written by LeRobot itself (AV1, 2 cameras 480x640,
#          8 x 250 frames) into target/lerobot-root
#   deps   carry target/bench-remote-deps (moto, boto3, flask, flask-cors and
#          what they need, wheels for CPython 3.12)
#   bench  carry target/bench-remote: robocache.xz (a release CLI, stripped,
#          xz-compressed) and the robocache wheel (release, `video-asm`)
# `WORKERS=16 bash benches/remote_read_gpu_machine.sh bench` gave the table
# of docs/benchmarks.md ("Remote datasets").
set -uo pipefail
B=$PWD/target/bench-remote
OUT=${OUT:-/tmp/out}
case "$1" in
write)
  D=$PWD/target/devdeps-lerobot
  python3 -m pip install --quiet --no-index --no-deps --target $D target/lerobot-wheels/*.whl || exit 1
  mkdir -p target/ffmpeg; for lib in $D/av.libs/lib{avcodec,avdevice,avfilter,avformat,avutil,swresample,swscale}-*; do
    name=$(basename $lib); ln -sf $lib target/ffmpeg/$(echo $name | sed -E 's/-[0-9a-f]+\.so\.([0-9]+).*/.so.\1/'); done
  export LD_LIBRARY_PATH=$PWD/target/ffmpeg:$D/av.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  rm -rf target/lerobot-root
  time PYTHONPATH=$D python3 benches/lerobot_loader.py write target/lerobot-root --episodes 8 --frames 250 > $OUT/write.log 2>&1 || { tail -30 $OUT/write.log; exit 1; }
  du -sh target/lerobot-root; find target/lerobot-root -type f | head -20
  ;;
deps)
  D=$PWD/target/devdeps-remote
  rm -rf $D; python3 -m pip install --quiet --no-index --no-deps --target $D target/bench-remote-deps/*.whl || exit 1
  PYTHONPATH=$D python3 -c "import moto.server, boto3; print('moto', moto.__version__)"
  ;;
bench)
  D=$PWD/target/devdeps-remote; R=$PWD/target/devdeps-robocache
  rm -rf $R; python3 -m pip install --quiet --no-index --no-deps --target $R $B/*.whl || exit 1
  python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('$B/robocache.xz'), open('/tmp/robocache', 'wb'))" && chmod +x /tmp/robocache
  /tmp/robocache info | head -5
  nproc; free -g | head -2
  LEROBOT=""; [ -d target/lerobot-root ] && LEROBOT="--lerobot target/lerobot-root"
  PYTHONPATH=$R:$D python3 benches/remote_read.py --robocache /tmp/robocache --out /tmp/bench-remote \
      --episodes ${EPISODES:-256} --steps 100 --image 128x128 --workers ${WORKERS:-8} $LEROBOT \
      --json $OUT/remote.json 2>&1 | tee $OUT/remote.log
  ;;
esac
