#!/usr/bin/env bash
# The test command (README, .ci/run): set up .venv, a stand-in image for each later profile, then run
# every test: the engine's, the port's, each committed profile on its vLLM release copy (fetched
# once, cached), and each fix's proof on the stand-in image of its profile.
# tests/test_lean_image.py builds the lean image venv (tools/lean-venv.sh: unidiff + click only, a few MB)
# once under $FIXPACK_TEST_CACHE, with pip's cache there too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/lint.sh
images="v0.30.0=$PWD/.venv/bin/python"
made=(.venv)  # each stand-in shares the files it has in common with these (hard links, tools/image-venv.sh)
# profile name and pinned vLLM version of every committed profile but v0.30.0 (whose image is .venv)
while read -r name version; do
  [ "$name" = v0.30.0 ] && continue
  bash tools/image-venv.sh "$version" ".venv-vllm-$version" "${made[@]}"
  made+=(".venv-vllm-$version")
  images="$images $name=$PWD/.venv-vllm-$version/bin/python"
done < <(.venv/bin/python - <<'PY'
import pathlib, tomllib
for p in sorted(pathlib.Path("profiles").glob("*.toml")):
    d = tomllib.loads(p.read_text())
    print(p.stem, d["targets"]["vllm"]["version"])
PY
)
export FIXPACK_IMAGE_PYTHONS="$images"
export FIXPACK_TEST_CACHE="${FIXPACK_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fixpack}"
export FIXPACK_VLLM_PYTHON="$PWD/.venv/bin/python"
# the tests run in parallel, one worker per CPU (pytest-xdist; FIXPACK_TEST_JOBS=N workers, 0 for none):
# the four image proofs take minutes each; loadgroup keeps each proof and the tests that read its image on one
# worker (conftest.py: a proof patches the image in place)
exec .venv/bin/python -m pytest -n "${FIXPACK_TEST_JOBS:-auto}" --dist loadgroup "$@"
