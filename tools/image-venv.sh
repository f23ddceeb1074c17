#!/usr/bin/env bash
# Make a virtual environment that stands in for an image: vLLM VERSION on the CPU build of torch
# 2.13.0 (what vLLM 0.30.0 to 0.32.0 pin). Usage: tools/image-venv.sh VERSION DIR
set -euo pipefail
version=$1 dir=$2
if "$dir/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '$version')" >/dev/null 2>&1; then
  exit 0
fi
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
echo "image-venv: vLLM $version on torch 2.13.0 (CPU) into $dir (a few minutes, about 5.5 GB)"
"${PYTHON:-python3}" -m venv "$dir"
pip=("$dir/bin/python" -m pip install -q --disable-pip-version-check)
quiet "${pip[@]}" torch==2.13.0
quiet "${pip[@]}" "vllm==$version" pytest
# they ship for CUDA and fail to load beside the CPU torch; vLLM imports fine without them
"$dir/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
