#!/usr/bin/env bash
# Build times of the datasets room at two commits, side by side in this
# checkout and its target folder, debug and non-incremental as CI builds:
# the room from clean, then one reader file and the sampler touched.
#
#   benches/build_times.sh 0330b9b main     # before and after the split into format crates
#
# It checks out each commit in turn (a clean working tree is required) and
# goes back to the branch it started on.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "commit or stash first" >&2; exit 1; }
start=$(git rev-parse --abbrev-ref HEAD)
eval "$(cargo xtask env 2>/dev/null)"
export CARGO_INCREMENTAL=0
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); printf "%.1f" "$(echo "$e - $s" | bc)"; }
measure() {
  git checkout -q "$1"
  local crates ros core
  crates=$(ls -d crates/robocache-datasets crates/robocache-datasource* 2>/dev/null | xargs -n1 basename)
  ros=$(ls crates/robocache-datasource-ros2/src/cdr.rs crates/robocache-datasets/src/ros2/cdr.rs 2>/dev/null | head -1)
  core=$(ls crates/robocache-datasource/src/sampler.rs crates/robocache-datasets/src/sampler.rs 2>/dev/null | head -1)
  cargo build -p robocache-cli >/dev/null 2>&1
  for c in $crates; do cargo clean -p "$c" >/dev/null 2>&1; done
  echo "$1: the datasets room from clean: $(t cargo build -p robocache-datasets) s"
  touch "$ros"; echo "$1: a ROS 2 reader file touched, the CLI rebuilt: $(t cargo build -p robocache-cli) s"
  touch "$core"; echo "$1: the sampler touched, the CLI rebuilt: $(t cargo build -p robocache-cli) s"
  touch "$ros"; echo "$1: a ROS 2 reader file touched, the room's tests rebuilt: $(t cargo test --no-run $(printf -- ' -p %s' $crates)) s"
}
measure "$1"
measure "$2"
git checkout -q "$start"
