#!/usr/bin/env bash
# The kernel step of the image's install.sh: build (compile and cache) the MXFP4 expert kernels where the
# toolchain (a GPU visible to torch, Triton with a GPU driver) exists; say why and succeed where it does not.
#
#   bash kernels/mxfp4-moe/install.sh [PYTHON]
#
# PYTHON: the image's Python (default: $PYTHON, else python3). Environment: TRITON_CACHE_DIR, where Triton
# keeps the compiled kernels (set it to a path that persists in the image); MXFP4_MOE_VARIANTS, the
# variants to build (default: muse); MXFP4_MOE_REQUIRE=1, fail when the toolchain is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${1:-${PYTHON:-python3}}"
args=()
for v in ${MXFP4_MOE_VARIANTS:-muse}; do args+=(--variant "$v"); done
if [[ "${MXFP4_MOE_REQUIRE:-0}" == "1" ]]; then args+=(--require); fi
cd "$here"
exec "$py" -m mxfp4_moe.build "${args[@]}"
