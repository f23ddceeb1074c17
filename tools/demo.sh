#!/usr/bin/env bash
# The main job on a real default: fetch the clean vLLM v0.30.0 release copy (PyPI sdist, hash-checked,
# cached), copy it to a scratch folder, apply profile v0.30.0 with both opt-in fixes, show the table,
# then run again (every fix already applied, nothing written). The scratch folder is a fresh one each run
# (mktemp -d: two users on one machine never share it), printed; or the empty or new folder given as $1.
set -euo pipefail
if [ $# -gt 0 ]; then  # checked before anything is set up or fetched; relative to where it was called
  case $1 in /*) scratch=$1 ;; *) scratch=$PWD/$1 ;; esac
  if [ -e "$scratch" ] && { [ ! -d "$scratch" ] || [ -n "$(ls -A "$scratch")" ]; }; then
    echo "tools/demo.sh: $scratch is not an empty folder: give a new or empty one (or none: a fresh one is made)" >&2
    exit 2
  fi
fi
cd "$(dirname "$0")/.."
bash tools/setup.sh --light
release=$(.venv/bin/python -m fixpack.cli fetch --profile v0.30.0 --target vllm | sed -n 's/^vllm=//p')
if [ $# -gt 0 ]; then
  mkdir -p "$scratch"
else
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/fixpack-demo.XXXXXX")
fi
echo "== scratch folder: $scratch (remove it when done: rm -rf $scratch)"
cp -a "$release" "$scratch/vllm-0.30.0"
echo "== first run: apply profile v0.30.0 (+ topk-subset-sampler, vllm-long-prefill-share) to $scratch/vllm-0.30.0"
set +e
.venv/bin/python apply_all.py --profile v0.30.0 --target vllm --root "vllm=$scratch/vllm-0.30.0" \
  topk-subset-sampler vllm-long-prefill-share
echo "== second run: the same command"
.venv/bin/python apply_all.py --profile v0.30.0 --target vllm --root "vllm=$scratch/vllm-0.30.0" \
  topk-subset-sampler vllm-long-prefill-share
