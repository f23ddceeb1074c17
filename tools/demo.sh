#!/usr/bin/env bash
# The main job on a real default: fetch the clean vLLM v0.30.0 release copy (PyPI sdist, hash-checked,
# cached), copy it to a scratch folder, apply profile v0.30.0 with both opt-in fixes, show the table,
# then run again (every fix already applied, nothing written).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --light
scratch="${1:-${TMPDIR:-/tmp}/fixpack-demo}"
release=$(.venv/bin/python -m fixpack.cli fetch --profile v0.30.0 --target vllm | sed -n 's/^vllm=//p')
rm -rf "$scratch" && mkdir -p "$scratch"
cp -a "$release" "$scratch/vllm-0.30.0"
echo "== first run: apply profile v0.30.0 (+ topk-subset-sampler, vllm-long-prefill-share) to $scratch/vllm-0.30.0"
set +e
.venv/bin/python apply_all.py --profile v0.30.0 --target vllm --root "vllm=$scratch/vllm-0.30.0" \
  topk-subset-sampler vllm-long-prefill-share
echo "== second run: the same command"
.venv/bin/python apply_all.py --profile v0.30.0 --target vllm --root "vllm=$scratch/vllm-0.30.0" \
  topk-subset-sampler vllm-long-prefill-share
