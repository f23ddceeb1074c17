#!/usr/bin/env bash
# Static checks run by tools/test.sh (and so by CI): mypy --strict on the engine, ruff with the rule
# set in pyproject.toml on everything else (the port and the kernels with their smaller stated set),
# and the pack lint (fixpack check).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
"$py" -m mypy --strict fixpack
"$py" -m ruff check fixpack tests tools ports kernels apply_all.py fixes/apply_all.py conftest.py
# the pack lint (offline: every fix in a profile or retired, proofs, fix.toml, patches, locks against the pack);
# the locks against the release copies are checked by tests/test_json_schemas.py (check --fresh, cached copies)
"$py" -m fixpack.cli check --color never
echo "lint: mypy --strict, ruff and fixpack check passed"
