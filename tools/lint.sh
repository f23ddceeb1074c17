#!/usr/bin/env bash
# Static checks run by tools/test.sh (and so by CI): mypy --strict on the engine, ruff with the rule
# set in pyproject.toml on everything else (the port and the kernels with their smaller stated set).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
"$py" -m mypy --strict fixpack
"$py" -m ruff check fixpack tests tools ports kernels apply_all.py fixes/apply_all.py conftest.py
echo "lint: mypy --strict and ruff passed"
