#!/usr/bin/env bash
# Make a virtual environment that stands in for an image: vLLM VERSION on the torch that VERSION pins.
# Usage: tools/image-venv.sh VERSION DIR [OTHER_VENV ...]
#
# pip keeps no cache of what it downloads here (--no-cache-dir: the 0.33.0 stand-in alone would leave
# several GB of wheels behind). Each OTHER_VENV (tools/test.sh names .venv) shares its files with DIR:
# a file of DIR's site-packages with the same name, content, mode and owner as one of OTHER_VENV's
# becomes a hard link to it, OTHER_VENV's own file kept (util-linux's hardlink; torch 2.13.0, triton and
# most of vLLM's requirements are the same files in the 0.30.0-0.32.0 stand-ins). The vllm package
# itself is never linked: a proof patches it in place. Without util-linux's hardlink, nothing is shared.
#
# The torch pin is read from the release's own metadata (its `Requires-Dist: torch==X`, the same line
# as in the sdist's PKG-INFO), fetched by pip without downloading the wheel (PEP 658 metadata):
#   vLLM 0.30.0, 0.31.0, 0.32.0 -> torch 2.13.0: a CPU build of it lies in this machine's wheel folder
#                                   (/opt/wheels, pip's find-links), so pip takes it (about 5.5 GB venv);
#   vLLM 0.33.0                 -> torch 2.14.0: only PyPI's CUDA build exists (it runs on CPU), with
#                                   the nvidia-* CUDA libraries it requires (a larger venv, see README).
# TORCH=X overrides the pin (for a version whose metadata cannot be read).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: tools/image-venv.sh VERSION DIR [OTHER_VENV ...]  (e.g. tools/image-venv.sh 0.31.0 .venv-vllm-0.31.0 .venv)" >&2
  exit 2
fi
version=$1 dir=$2
shift 2
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
torch_pin() {  # the X of vLLM $version's "torch==X" requirement; exit 2 when it cannot be read
  local report rc=0
  report=$(mktemp)
  if ! quiet "${PYTHON:-python3}" -m pip install -q --disable-pip-version-check --no-cache-dir --dry-run --no-deps \
      --ignore-installed --report "$report" "vllm==$version" >/dev/null; then
    rm -f "$report"
    echo "image-venv: pip could not resolve vllm==$version on the index (above): check the version and the network," \
      "or set TORCH=X; nothing was made" >&2
    return 2
  fi
  "${PYTHON:-python3}" - "$report" <<'PY' || rc=$?
import json, re, sys
meta = json.load(open(sys.argv[1]))["install"][0]["metadata"]
pins = [m.group(1) for r in meta.get("requires_dist", [])
        if (m := re.fullmatch(r"torch\s*==\s*([0-9][^;\s]*)", r.split(";")[0].strip()))]
if not pins:
    sys.exit(f"image-venv: vllm {meta['version']} names no torch==X requirement; set TORCH=X")
print(pins[0])
PY
  rm -f "$report"
  return $rc
}
make_venv() {
  torch=${TORCH:-}
  [ -n "$torch" ] || torch=$(torch_pin) || exit 2
  echo "image-venv: vLLM $version on torch $torch into $dir (a few minutes, 5.5 GB or more)"
  "${PYTHON:-python3}" -m venv "$dir"
  pip=("$dir/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir)
  quiet "${pip[@]}" "torch==$torch"
  quiet "${pip[@]}" "vllm==$version" pytest
  # What the proofs import. vLLM 0.30.0-0.32.0 pull in CUDA builds of torchvision, torchaudio and
  # torchcodec that fail to load beside the CPU torch 2.13.0 (and break these imports); dropping the three
  # fixes that (nothing the proofs run needs them). On 0.33.0 (CUDA torch 2.14.0) they load: kept.
  mods="vllm, vllm.v1.sample.ops.topk_topp_sampler, vllm.v1.core.sched.scheduler"
  mods="$mods, vllm.v1.executor.multiproc_executor, vllm.tokenizers.detokenizer_utils, vllm.v1.engine.logprobs"
  if ! "$dir/bin/python" -c "import $mods" >/dev/null 2>&1; then
    "$dir/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    "$dir/bin/python" -c "import $mods" || { echo "image-venv: vLLM does not import in $dir" >&2; exit 1; }
  fi
}
# a DIR that has vLLM VERSION already is kept as it is (its files are still shared below)
if ! "$dir/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '$version')" >/dev/null 2>&1; then
  make_venv
fi
share=() named=()
for other in "$@"; do  # (a glob that matches nothing stays as it is: no such folder)
  site=("$other"/lib/python3*/site-packages)
  if [ ! -d "${site[0]}" ]; then
    echo "image-venv: $other holds no lib/python3*/site-packages (no virtual environment): $dir shares nothing with it" >&2
  elif [ "$(stat -c %d "${site[0]}")" != "$(stat -c %d "$dir")" ]; then
    echo "image-venv: $other is on another file system than $dir: no hard link can join them" >&2
  else
    share+=("${site[0]}") named+=("$other")
  fi
done
if [ ${#share[@]} -gt 0 ]; then
  if hardlink --version 2>/dev/null | grep -q util-linux; then
    # -O: of equal files the oldest stays (OTHER_VENV's, made first: its files and their bytecode are left as they
    # were; DIR's bytecode of a linked module is compiled again on its first import); -f: same names only;
    # a failure here costs disk, not the stand-in: said, and the script goes on
    if saved=$(hardlink -t -O -f -x '/site-packages/vllm/' "${share[@]}" "$dir"/lib/python3*/site-packages \
        | sed -n 's/^Saved: *//p'); then
      echo "image-venv: $dir shares its files that are the same as in ${named[*]} (hard links): ${saved:-nothing} saved"
    else
      echo "image-venv: hardlink failed: $dir shares none or some of its files with ${named[*]} (it works all the same)" >&2
    fi
  else
    echo "image-venv: no util-linux hardlink on this machine: $dir shares no files with ${named[*]}"
  fi
fi
