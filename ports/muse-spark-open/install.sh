#!/usr/bin/env bash
# Muse Spark Open into a vLLM image: check the image's commits against the profile (--profile, default
# v0.30.0), apply the profile with the port's components (the plugin muse-spark-open and the kernels' package mxfp4-moe,
# installed by the fix pack into vLLM's site-packages, recorded in its manifest, removed by its revert),
# build the MXFP4 kernels where a toolchain exists, run the build gates.
#
#   ports/muse-spark-open/install.sh [options]
#
#   --profile NAME      the fix pack's profile for the image's vLLM release (default: v0.30.0, the recipe's;
#                       v0.31.0 to v0.33.0 carry the port too; a mismatch names the profile that fits)
#   --python PATH       the image's Python (default: python3); vLLM and vllm-gaudi are found in it
#   --root NAME=PATH    where a target lives, passed to the fix pack (repeatable)
#   --opt-in "IDS"      opt-in fixes to apply (default: the recipe's: topk-subset-sampler vllm-long-prefill-share)
#   --plugin-site DIR   install the plugin into DIR (pip --target) instead of as a fix pack component,
#                       and put DIR on PYTHONPATH for the gates (a read-only image, a vLLM source tree,
#                       or a test); the fix pack then neither records nor reverts the plugin
#   --sbom FILE         after the profile is applied, write the image's CycloneDX SBOM to FILE
#   --dry-run           check every step and write nothing to the image: the profile is a dry run and
#                       the plugin is installed only into --plugin-site when one is given
#   --check             the build gates only (commits, profile state, plugin gates); writes nothing
#   --skip-kernels      neither install the kernels' package nor build the kernels
#   -h, --help
#
# Exit status: 0 done; 10 bad arguments; 11 the image does not match the profile (a pin or target);
# 12 the profile did not apply (the fix pack's own exit code is printed); 13 the plugin did not
# install; 14 the kernels did not build; 15 a build gate failed; 16 the environment lacks something.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
profile="v0.30.0"
py="python3"
roots=()
opt_in="topk-subset-sampler vllm-long-prefill-share"
plugin_site=""
dry_run=0
check=0
skip_kernels=0
sbom=""

say() { printf 'install.sh: %s\n' "$*"; }
die() { local code=$1; shift; printf 'install.sh: ERROR: %s\n' "$*" >&2; exit "$code"; }
usage() { sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
# an option's value: there, and not the next option (`--profile --root X` took '--root' as the profile)
need() { [ -n "$3" ] && [[ "$3" != -* ]] || die 10 "$1 needs $2${3:+ (got the option '$3'; put the value after $1)}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --profile) need "$1" "a name" "${2-}"; profile="$2"; shift 2 ;;
    --profile=*) profile="${1#*=}"; shift ;;
    --python) need "$1" "a path" "${2-}"; py="$2"; shift 2 ;;
    --python=*) py="${1#*=}"; shift ;;
    --root) need "$1" "NAME=PATH" "${2-}"; roots+=(--root "$2"); shift 2 ;;
    --root=*) roots+=(--root "${1#*=}"); shift ;;
    --opt-in) need "$1" "a list" "${2-}"; opt_in="$2"; shift 2 ;;
    --opt-in=*) opt_in="${1#*=}"; shift ;;
    --plugin-site) need "$1" "a folder" "${2-}"; plugin_site="$2"; shift 2 ;;
    --plugin-site=*) plugin_site="${1#*=}"; shift ;;
    --sbom) need "$1" "a file" "${2-}"; sbom="$2"; shift 2 ;;
    --sbom=*) sbom="${1#*=}"; shift ;;
    --dry-run) dry_run=1; shift ;;
    --check) check=1; shift ;;
    --skip-kernels) skip_kernels=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die 10 "unknown argument: $1 (see --help)" ;;
  esac
done

known="$(cd "$repo/profiles" && ls -- *.toml 2>/dev/null | sed 's/\.toml$//' | tr '\n' ' ')"
if [[ "$profile" == */* ]] || [ -z "$profile" ]; then
  die 10 "--profile takes a profile's name, not a path: '$profile' (profiles: ${known% })"
elif [ ! -f "$repo/profiles/$profile.toml" ]; then
  die 10 "unknown profile '$profile': no $repo/profiles/$profile.toml (profiles: ${known% })"
fi

# the port's components, installed by the fix pack with the profile (none with --plugin-site)
components=""
if [ -z "$plugin_site" ]; then
  components="muse-spark-open"
  [ "$skip_kernels" = 1 ] || components="$components mxfp4-moe"
fi

# -- 0. the environment -----------------------------------------------------------------------
command -v "$py" >/dev/null 2>&1 || [ -x "$py" ] || die 16 "no Python at '$py' (give the image's Python with --python)"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die 16 "$py is older than Python 3.10, which the fix pack and the plugin need"
# what status and apply_all.py import (setup.cfg's install_requires): GitPython, rich and pypi-simple serve the
# maintainer's commands only (rich draws tables on a terminal where it is installed; plain lines without it)
"$py" -c 'import unidiff, click
try:
    import tomllib
except ModuleNotFoundError:
    import tomli' 2>/dev/null \
  || die 16 "$py lacks the fix pack's dependencies (unidiff click, tomli on 3.10): pip install them, or pip install -e $repo"
[ -f "$repo/fixes/apply_all.py" ] || die 16 "no fix pack at $repo (fixes/apply_all.py missing)"
# the engine's bytecode, compiled once here: an image often sets PYTHONDONTWRITEBYTECODE, and every run of
# apply_all.py would then compile the engine from source again (a read-only checkout just keeps doing that)
"$py" -m compileall -q "$repo/fixpack" >/dev/null 2>&1 || true
if [ -n "$components" ]; then
  "$py" -c 'import installer, setuptools' 2>/dev/null \
    || die 16 "$py lacks installer or setuptools, which the fix pack needs to install the port's components: pip install installer setuptools (or give --plugin-site DIR)"
fi
if [ -n "$sbom" ]; then
  "$py" -c 'import cyclonedx' 2>/dev/null || die 16 "$py lacks cyclonedx-python-lib, which --sbom needs: pip install 'cyclonedx-python-lib[json-validation]'"
fi
if [ -n "$plugin_site" ]; then
  mkdir -p "$plugin_site" || die 16 "cannot create --plugin-site $plugin_site"
  plugin_site="$(cd "$plugin_site" && pwd)"
  export PYTHONPATH="$plugin_site${PYTHONPATH:+:$PYTHONPATH}"
fi
fixpack() { PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$py" -m fixpack.cli "$@"; }
json_field() { "$py" -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {'d': d}))" "$1"; }

# -- 1. the image's commits against the profile -----------------------------------------------
say "step 1/5: the image's vLLM and vllm-gaudi against profile $profile"
status_json="$(fixpack status --profile "$profile" "${roots[@]}" --json || true)"
[ -n "$status_json" ] || die 16 "the fix pack printed nothing for 'status' (run: PYTHONPATH=$repo $py -m fixpack.cli status --profile $profile)"
status_rc="$(printf '%s' "$status_json" | json_field "d.get('exit_code')")" \
  || die 16 "the fix pack's status is not JSON: $(printf '%s' "$status_json" | head -c 400)"
if [ "$status_rc" = 2 ] || [ "$status_rc" = 1 ]; then
  die 16 "the fix pack cannot check the image (exit $status_rc): $(printf '%s' "$status_json" | json_field "d.get('error')")"
fi
targets="$(printf '%s' "$status_json" | json_field "'\n'.join(t['name']+' '+t['status']+' '+(t.get('version') or '-')+' '+(t.get('commit') or '-')+' '+(t.get('message') or '').replace(chr(10),' ') for t in d['targets'])")"
target_args=()
vllm_found=0
while read -r name status version commit message; do
  [ -n "$name" ] || continue
  case "$name:$status" in
    vllm:found) vllm_found=1; say "  vllm $version (commit $commit): matches the pin" ;;
    vllm-gaudi:found) say "  vllm-gaudi $version (commit $commit): matches the pin" ;;
    vllm-gaudi:missing)
      say "  vllm-gaudi: ABSENT from this image (not installed in $py). The vllm-gaudi steps are skipped and"
      say "  the profile is applied to vLLM only (--target vllm). This is not the Gaudi image the recipe serves from."
      target_args=(--target vllm) ;;
    *:missing) die 11 "$name is missing from the image: $message" ;;
    *) die 11 "$name does not match profile $profile ($status): $message" ;;
  esac
done <<< "$targets"
[ "$vllm_found" = 1 ] || die 11 "the fix pack did not find vLLM in $py (status: $(printf '%s' "$status_json" | json_field "d.get('error')"))"

# -- 2. the profile ---------------------------------------------------------------------------
if [ "$check" = 1 ]; then
  say "step 2/5: profile state (--check: nothing is applied)"
  state_json="$(fixpack status --profile "$profile" "${roots[@]}" "${target_args[@]}" --json || true)"
  wanted="$("$py" - "$repo/profiles/$profile.toml" $opt_in <<'PY'
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
prof = tomllib.load(open(sys.argv[1], "rb"))
print(" ".join(prof["fixes"]["default"] + sys.argv[2:]))
PY
)" || die 16 "cannot read profiles/$profile.toml"
  wanted="$wanted $components"
  not_in="$(printf '%s' "$state_json" | json_field "' '.join(f['id']+'='+f['state'] for f in d['fixes'] if f['id'] in '''$wanted'''.split() and f['state'] not in ('applied','upstreamed') and f['target'] in [t['name'] for t in d['targets'] if t['status']=='found'])")" \
    || die 16 "the fix pack's status could not be read: $(printf '%s' "$state_json" | head -c 400)"
  if [ -n "$not_in" ]; then
    die 15 "the image is not in the profile's state: $not_in (apply it: install.sh without --check)"
  fi
  say "  every fix of the profile (and opt-in: ${opt_in:-none}) is applied or upstreamed${components:+; components in: $components}"
else
  say "step 2/5: apply profile $profile${opt_in:+ with opt-in $opt_in}${components:+ and components $components}"
  apply_args=(--profile "$profile" "${roots[@]}" "${target_args[@]}")
  [ "$dry_run" = 1 ] && apply_args+=(--dry-run)
  [ -n "$sbom" ] && apply_args+=(--sbom "$sbom")
  set +e
  # shellcheck disable=SC2086
  "$py" "$repo/fixes/apply_all.py" "${apply_args[@]}" $opt_in $components
  rc=$?
  set -e
  case $rc in
    0) say "  profile in place$([ "$dry_run" = 1 ] && echo ' (dry run: nothing written)')" ;;
    2) die 12 "the fix pack refused its input (exit 2): a profile, patch, lock or fix name" ;;
    3) die 12 "the image does not match the profile (exit 3): see the table above (components need vLLM installed in site-packages; for a source tree give --plugin-site DIR)" ;;
    4) die 12 "a fix does not apply to this image (exit 4, conflict): see the table above" ;;
    5) die 12 "the target is not writable or another run holds the lock (exit 5)" ;;
    *) die 12 "the fix pack failed (exit $rc)" ;;
  esac
fi

# -- 3. the plugin ----------------------------------------------------------------------------
if [ -n "$components" ] && [ "$dry_run" = 1 ]; then
  say "step 3/5: plugin (dry run: not installed; step 2 would install it as the component muse-spark-open)"
elif [ -n "$components" ]; then
  say "step 3/5: plugin: installed by step 2 as the fix pack's component muse-spark-open (fixpack status lists it)"
elif [ "$check" = 1 ]; then
  say "step 3/5: plugin (--check: not installed; the gates look for it)"
elif [ "$dry_run" = 1 ] && [ -z "$plugin_site" ]; then
  say "step 3/5: plugin (dry run: not installed; give --plugin-site DIR to install it beside the image)"
else
  say "step 3/5: install the plugin muse-spark-open${plugin_site:+ into $plugin_site}"
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT
  # build from a copy so that the source tree gets no build/ or egg-info folders
  cp -r "$here/pyproject.toml" "$here/README.md" "$here/muse_spark_open" "$build/"
  pip_args=(install --no-deps --disable-pip-version-check --no-input -q)
  # build with the image's own setuptools when it has one (no index needed); else pip fetches it
  "$py" -c 'import setuptools' 2>/dev/null && pip_args+=(--no-build-isolation)
  [ -n "$plugin_site" ] && pip_args+=(--target "$plugin_site" --upgrade)
  "$py" -m pip "${pip_args[@]}" "$build" || die 13 "pip could not install the plugin from $here"
  say "  installed"
fi

# -- 4. the kernels ---------------------------------------------------------------------------
kernels="$repo/kernels/mxfp4-moe"
if [ "$check" = 1 ] || [ "$skip_kernels" = 1 ]; then
  say "step 4/5: kernels (skipped: $([ "$check" = 1 ] && echo --check || echo --skip-kernels))"
elif [ ! -f "$kernels/mxfp4_moe/build.py" ]; then
  say "step 4/5: kernels: $kernels has no build entry (mxfp4_moe/build.py): nothing to build;"
  say "  the experts take the stock path"
else
  # the port reaches the kernels through the package mxfp4_moe: step 2 installed it as the component
  # mxfp4-moe (its Python files; the GPU build below stays here, it needs the image's toolchain)
  if [ -n "$components" ] && [ "$dry_run" = 1 ]; then
    say "step 4/5: kernels: mxfp4_moe not installed (dry run; step 2 would install it as the component mxfp4-moe)"
  elif [ -n "$components" ]; then
    say "step 4/5: kernels: mxfp4_moe installed by step 2 as the fix pack's component mxfp4-moe"
  elif [ -n "$plugin_site" ]; then
    say "step 4/5: kernels: with --plugin-site, put $kernels on PYTHONPATH to use them"
  fi
  toolchain="$("$py" - <<'PY'
import importlib.util
if importlib.util.find_spec("habana_frameworks") is not None:
    print("gaudi")
else:
    try:
        import torch
        gpu = torch.cuda.is_available()
    except Exception:
        gpu = False
    print("gpu-triton" if gpu and importlib.util.find_spec("triton") is not None else "none")
PY
)"
  if [ "$toolchain" = "none" ]; then
    say "step 4/5: kernels: NO TOOLCHAIN here (no Gaudi software stack, no GPU with Triton): the MXFP4"
    say "  kernels are not built; with MUSE_SPARK_MXFP4_KERNELS=1 the experts take the stock path (about half"
    say "  the decode speed on the seed's node) and the log says why."
  elif [ "$dry_run" = 1 ]; then
    say "step 4/5: kernels: toolchain $toolchain found; dry run: not built"
  else
    say "step 4/5: build the MXFP4 kernels ($toolchain)"
    kpath="$kernels${PYTHONPATH:+:$PYTHONPATH}"
    [ -n "$components" ] && kpath="${PYTHONPATH:-}"  # the installed package, not the checkout
    PYTHONPATH="$kpath" "$py" -m mxfp4_moe.build \
      || die 14 "the kernel build failed (PYTHONPATH=$kernels $py -m mxfp4_moe.build)"
    say "  kernels built"
  fi
fi

# -- 5. the build gates -----------------------------------------------------------------------
say "step 5/5: build gates"
if ! "$py" -c 'import muse_spark_open' >/dev/null 2>&1; then
  # not installed (--check, --dry-run): run the gates from the source tree; they report what is missing
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$here"
fi
"$py" -m muse_spark_open.buildcheck || die 15 "a build gate failed (see above)"
say "done$([ "$check" = 1 ] && echo ' (--check)')$([ "$dry_run" = 1 ] && echo ' (dry run)')"
