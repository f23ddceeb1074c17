#!/usr/bin/env bash
# Make the lean image environment: a fresh venv holding only what an image needs for apply, status and
# revert (setup.cfg's install_requires: unidiff, click, tomli on 3.10), installed with --no-deps and no
# fixpack (fixes/apply_all.py puts its checkout on sys.path). Nothing of the 'maintainer' extra.
# Usage: tools/lean-venv.sh DIR   (PYTHON picks the interpreter; PIP_CACHE_DIR is honoured)
# Built beside DIR and renamed into place, so DIR is either complete or absent; an existing DIR is kept.
set -euo pipefail
dir=$1
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$dir/.lean-complete" ]; then
  exit 0
fi
# one build at a time per DIR (two test workers, two CI jobs on one cache): the later one waits, then
# finds DIR complete; without it, the later build removed the venv the earlier one was running
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [ -f "$dir/.lean-complete" ]; then
  exit 0
fi
reqs=$("$py" - "$here/setup.cfg" <<'PY'
import configparser, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[1])
print("\n".join(l.strip() for l in cfg["options"]["install_requires"].splitlines() if l.strip()))
PY
)
tmp="$dir.tmp-$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$dir")"
"$py" -m venv "$tmp"
mapfile -t req_array <<<"$reqs"
"$tmp/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${req_array[@]}"
printf '%s\n' "$reqs" >"$tmp/.lean-complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
