#!/usr/bin/env bash
# Serving gates of Muse Spark Open against a running OpenAI-compatible server (the Gaudi node).
#
#   tests/hpu/run_gates.sh --base-url http://127.0.0.1:8000/v1 --model muse-spark-open \
#       --reference-logprobs ref.json [--gates perplexity,tools,...] [--json-out gates.json]
#
# ref.json comes from the CPU reference (a host with the checkpoint and enough memory):
#   python -m muse_spark_open.reference --checkpoint DIR --token-ids ids.json --out ref.json
# with ids.json the token ids of an evaluation text (POST /tokenize on the server gives them).
# Each gate prints PASS/FAIL, its figure and its threshold (serving/gate-thresholds.json).
# Exit status: 0 all passed, 1 a gate failed, 2 bad arguments or no server at the URL.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="$(cd "$here/../.." && pwd)"
py="${PYTHON:-python3}"
export PYTHONPATH="$port${PYTHONPATH:+:$PYTHONPATH}"
thresholds="$port/serving/gate-thresholds.json"
for a in "$@"; do
  case "$a" in --thresholds|--thresholds=*) thresholds="" ;; esac
done
exec "$py" -m muse_spark_open.gates ${thresholds:+--thresholds "$thresholds"} "$@"
