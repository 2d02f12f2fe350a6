#!/bin/bash
# Before/after at the same machine load: the 100-conversation figure of benchmarks/peers.py
# (artifactflow and the Agents SDK) for the code at BASE (git archive of its src/, imported
# ahead of the editable install through PYTHONPATH) and for the working tree, alternating,
# REPEATS pairs. The benchmark harness is this tree's in both; each run asserts its model calls.
#
# Run: benchmarks/ab_concurrent.sh BASE [REPEATS]   (e.g. benchmarks/ab_concurrent.sh 1d7928c 3)
set -euo pipefail
base=${1:?usage: $0 BASE_COMMIT [REPEATS]}
repeats=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/pkg"
git -C "$root" archive "$base" src | tar -x -C "$tmp"
ln -s "$tmp/src" "$tmp/pkg/artifactflow"
for i in $(seq "$repeats"); do
  for side in before after; do
    echo "== $side ($([ $side = before ] && echo "$base" || echo 'working tree')), pair $i, load $(cut -d' ' -f1 /proc/loadavg)"
    if [ $side = before ]; then
      PYTHONPATH="$tmp/pkg" "$python" "$root/benchmarks/peers.py" --concurrent --peers artifactflow,agents-sdk --repeats 1 2>/dev/null | tail -2
    else
      "$python" "$root/benchmarks/peers.py" --concurrent --peers artifactflow,agents-sdk --repeats 1 2>/dev/null | tail -2
    fi
  done
done
