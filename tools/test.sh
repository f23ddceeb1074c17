#!/usr/bin/env bash
# The test command (README, .ci/run): set up .venv, then run every test: the engine's, the release
# copy of vLLM 0.30.0 (fetched once, cached), and each fix's proof on the image stand-in.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export FIXPACK_TEST_CACHE="${FIXPACK_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fixpack}"
export FIXPACK_VLLM_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
