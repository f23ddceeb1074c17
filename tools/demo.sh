#!/usr/bin/env bash
# The main job on a real default: fetch the clean vLLM v0.30.0 release copy (PyPI sdist, hash-checked,
# cached), copy it to a scratch folder, apply profile v0.30.0 with both opt-in fixes, show the table,
# then run again (every fix already applied, nothing written). The scratch folder is a fresh one each run
# (mktemp -d: two users on one machine never share it), printed; or the empty or new folder given as $1.
#
# Usage: bash tools/demo.sh [DIR]     (-h, --help: this text)
# DIR is claimed before anything is set up: of two runs given one folder the second is refused (exit 2), as
# is a folder that is not empty, a file, a link to nothing or one that cannot be written; a run that fails
# before its copy is done takes back what it made.
set -euo pipefail
usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }
die() { echo "tools/demo.sh: $1" >&2; exit 2; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*) die "unknown option '$1' (a folder whose name starts with '-': give it as ./$1)" ;;
esac
[ $# -le 1 ] || die "one folder at most, got $# arguments (usage: bash tools/demo.sh [DIR])"
[ $# -eq 0 ] || [ -n "$1" ] || die "an empty folder name: give a folder, or none (a fresh one is made)"
made=0      # this run made the scratch folder
claimed=0   # this run made its vllm-0.30.0 (the claim); removed again if the run fails before the copy is done
copied=0
cleanup() {
  if [ "$claimed" = 1 ] && [ "$copied" = 0 ]; then
    rm -rf -- "$scratch/vllm-0.30.0"
    if [ "$made" = 1 ]; then rmdir -- "$scratch" 2>/dev/null || true; fi
  fi
}
trap cleanup EXIT
# The scratch folder is claimed before anything is set up or fetched (relative to where it was called):
# `mkdir` of its vllm-0.30.0 is atomic, so of two runs given one folder the second is refused.
if [ $# -gt 0 ]; then
  case $1 in /*) scratch=$1 ;; *) scratch=$PWD/$1 ;; esac
  if [ -L "$scratch" ] && [ ! -e "$scratch" ]; then
    die "$scratch is a link to nothing ($(readlink -- "$scratch")): give a new or empty folder"
  fi
  if [ -e "$scratch" ] && { [ ! -d "$scratch" ] || [ -n "$(ls -A -- "$scratch")" ]; }; then
    [ -d "$scratch" ] && [ "$(ls -A -- "$scratch")" = vllm-0.30.0 ] \
      && die "$scratch is being used by another run, or holds the copy a run left (its vllm-0.30.0 alone is there): give another folder"
    die "$scratch is not an empty folder: give a new or empty one (or none: a fresh one is made)"
  fi
  if [ ! -e "$scratch" ]; then
    parent=$(dirname -- "$scratch")
    mkdir -p -- "$parent" 2>/dev/null || die "cannot make $parent (a file in the way, or no permission): give another folder"
    if mkdir -- "$scratch" 2>/dev/null; then
      made=1
    elif [ ! -d "$scratch" ]; then
      die "cannot make $scratch (is $parent writable?): give another folder"
    fi  # else another run made it just now: the claim below decides
  fi
else
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/fixpack-demo.XXXXXX") \
    || die "cannot make a scratch folder in ${TMPDIR:-/tmp}: set TMPDIR to a writable folder, or give one"
  made=1
fi
if ! mkdir -- "$scratch/vllm-0.30.0" 2>/dev/null; then
  [ -e "$scratch/vllm-0.30.0" ] && die "$scratch is being used by another run (its vllm-0.30.0 is there): give another folder"
  die "cannot write in $scratch (permissions, a read-only or immutable folder?): give another folder"
fi
claimed=1
# the clean-up command, quoted for the shell (a name with spaces), and through a link to what it points at
shown=$(cd -P -- "$scratch" && pwd)
echo "== scratch folder: $shown (remove it when done: rm -rf -- $(printf '%q' "$shown"))"
cd "$(dirname "$0")/.."
bash tools/setup.sh --light
release=$(.venv/bin/python -m fixpack.cli fetch --profile v0.30.0 --target vllm | sed -n 's/^vllm=//p')
[ -n "$release" ] && [ -d "$release" ] || die "fetch named no release copy (got '$release'): see its output above"
cp -a -- "$release/." "$scratch/vllm-0.30.0/"
copied=1
# the second run only after the first succeeded: a run that fails for any reason (refused, or interrupted: fixpack
# exits 5 on Ctrl-C, and bash goes on after a child that handled the signal) stops the demo with its code
apply_run() {  # $1: which run (its words in the failure's line)
  local code=0
  .venv/bin/python apply_all.py --profile v0.30.0 --target vllm --root "vllm=$scratch/vllm-0.30.0" \
    topk-subset-sampler vllm-long-prefill-share || code=$?
  [ "$code" = 0 ] && return 0
  local why=""
  [ "$code" = 5 ] && why=": interrupted, or an environment problem"
  echo "tools/demo.sh: the $1 run failed (exit $code$why; see its output above)$2" >&2
  exit "$code"
}
echo "== first run: apply profile v0.30.0 (+ topk-subset-sampler, vllm-long-prefill-share) to $scratch/vllm-0.30.0"
apply_run first "; the second run was not started"
echo "== second run: the same command"
apply_run second ""
