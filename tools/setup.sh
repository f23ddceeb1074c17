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
# The editable install of this checkout, unless .venv holds it already: made here (its direct_url.json names this
# folder) from the same setup.cfg, pyproject.toml and version (their sha256 in .venv/.fixpack-setup), and every
# requirement of .[maintainer,test], and theirs in turn, installed at a version they allow. (pip install -e again
# resolves and reinstalls for seconds, and points the install at the checkout that ran it last.)
stamp=$(cat setup.cfg pyproject.toml fixpack/__init__.py | sha256sum | cut -d' ' -f1)" $(pwd -P)"
ready() {
  [ -f .venv/.fixpack-setup ] && [ "$(cat .venv/.fixpack-setup)" = "$stamp" ] || return 1
  .venv/bin/python -I - "$(pwd -P)" <<'PY' >/dev/null 2>&1  # (-I: not the egg-info in the checkout)
import importlib.metadata as md
import json
import pathlib
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

dist = md.distribution("vllm-gaudi-fixpack")
made = json.loads(dist.read_text("direct_url.json") or "{}")
if made.get("url") != pathlib.Path(sys.argv[1]).as_uri() or not made.get("dir_info", {}).get("editable"):
    sys.exit(1)  # (another folder's install, or a copy of this one that does not follow its edits)
todo, seen = [(dist, ("", "maintainer", "test"))], set()
while todo:
    d, extras = todo.pop()
    for text in d.requires or []:
        req = Requirement(text)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
            continue
        found = md.distribution(req.name)  # (PackageNotFoundError: not installed)
        if not req.specifier.contains(found.version, prereleases=True):
            sys.exit(1)
        key = (canonicalize_name(req.name), tuple(sorted(req.extras)))
        if key not in seen:
            seen.add(key)
            todo.append((found, ("", *sorted(req.extras))))
PY
}
if ready; then
  echo "setup: .venv holds this checkout's install already (setup.cfg, pyproject.toml and version unchanged)"
else
  rm -f .venv/.fixpack-setup
  quiet "${pip[@]}" -e '.[maintainer,test]'
  echo "$stamp" > .venv/.fixpack-setup
fi
# an editable install compiles nothing: compile the engine once, so that a run with PYTHONDONTWRITEBYTECODE
# set (as in many images) does not compile it from source every time
.venv/bin/python -m compileall -q fixpack >/dev/null
echo "setup: .venv ready ($(.venv/bin/python --version))"
