#!/usr/bin/env bash
# Set up .venv: the engine and its test tools, and (unless --light) the image stand-in:
# vLLM 0.30.0 on the CPU build of torch 2.13.0 that it pins.
set -euo pipefail
cd "$(dirname "$0")/.."
# One setup at a time in a checkout (two demos started at once on a new clone both ran pip into one .venv, and
# one failed): the lock is on the checkout's folder itself, held until this script ends; nothing is left behind.
if command -v flock >/dev/null 2>&1; then
  exec 9<.
  flock -n 9 || { echo "setup: another setup is running in this checkout; waiting for it to finish"; flock 9; }
fi
PY=${PYTHON:-python3}
light=0
[ "${1:-}" = "--light" ] && light=1
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# this machine kind's pip.conf names local index folders that may be absent: drop that noise only
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
if [ "$light" = 0 ] && ! .venv/bin/python -c "import vllm" >/dev/null 2>&1; then
  echo "setup: installing torch 2.13.0 (CPU) and vllm 0.30.0 into .venv (a few minutes, about 5.5 GB)"
  # no pip cache of these downloads (--no-cache-dir: GBs of wheels left behind that nothing reads again)
  quiet "${pip[@]}" --no-cache-dir torch==2.13.0
  quiet "${pip[@]}" --no-cache-dir vllm==0.30.0
  # they ship for CUDA and fail to load beside the CPU torch; vLLM imports fine without them
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
# The editable install of this checkout, unless .venv holds it already: made here from the same setup.cfg and
# pyproject.toml (their sha256 in .venv/.fixpack-setup), and every requirement of .[maintainer,test] installed
# at a version it allows. (pip install -e again would resolve and reinstall, and point the install at this
# checkout: a .venv shared with another checkout would run that one's engine from here.)
stamp=$(cat setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1)" $(pwd -P)"
ready() {
  [ -f .venv/.fixpack-setup ] && [ "$(cat .venv/.fixpack-setup)" = "$stamp" ] || return 1
  .venv/bin/python - <<'PY' >/dev/null 2>&1
import importlib.metadata as md
import sys

from packaging.requirements import Requirement

for text in md.requires("vllm-gaudi-fixpack") or []:
    req = Requirement(text)
    wanted = [{"extra": e} for e in ("", "maintainer", "test")]
    if req.marker is not None and not any(req.marker.evaluate(w) for w in wanted):
        continue
    try:
        found = md.version(req.name)
    except md.PackageNotFoundError:
        sys.exit(1)
    if not req.specifier.contains(found, prereleases=True):
        sys.exit(1)
PY
}
if ready; then
  echo "setup: .venv holds this checkout's install already (setup.cfg and pyproject.toml unchanged)"
else
  rm -f .venv/.fixpack-setup
  quiet "${pip[@]}" -e '.[maintainer,test]'
  echo "$stamp" > .venv/.fixpack-setup
fi
# an editable install compiles nothing: compile the engine once, so that a run with PYTHONDONTWRITEBYTECODE
# set (as in many images) does not compile it from source every time
.venv/bin/python -m compileall -q fixpack >/dev/null
echo "setup: .venv ready ($(.venv/bin/python --version))"
