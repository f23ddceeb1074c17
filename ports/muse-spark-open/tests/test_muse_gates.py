"""The serving gates' logic on CPU, against a fake OpenAI-compatible server on 127.0.0.1 whose
logprobs come from the CPU reference of a tiny checkpoint."""

from muse_testutil import _no_stray_switches, tiny_ckpt  # noqa: F401  (fixtures)

import argparse
import json
import subprocess

import pytest

from muse_testutil import PORT, subprocess_env
from muse_fake_openai import Behaviour, FakeServer
from muse_spark_open import gates
from muse_spark_open.reference import MuseSparkReference

IDS = [1, 5, 9, 33, 2, 7, 70, 11, 12, 40, 41, 3, 17, 88, 23, 54]


@pytest.fixture(scope="module")
def ref(tiny_ckpt):
    return MuseSparkReference.from_checkpoint(tiny_ckpt)


@pytest.fixture(scope="module")
def thresholds(tmp_path_factory):
    t = json.loads((PORT / "serving" / "gate-thresholds.json").read_text())
    t["needles"].update(lengths=[150, 600], depths=[0.2, 0.8])
    t["decode_vs_prefill"]["tokens"] = 4
    t["greedy_repeat"]["tokens"] = 8
    t["decode_speed"]["tokens"] = 12
    path = tmp_path_factory.mktemp("gates") / "thresholds.json"
    path.write_text(json.dumps(t))
    return path


def args_for(server, thresholds, tmp_path, gate="all", reference=True):
    ref_file = tmp_path / "ref.json"
    if reference:
        ref_file.write_text(json.dumps({"token_ids": IDS, "logprobs": server.ref.logprobs(IDS)}))
    return argparse.Namespace(base_url=server.url, model="muse-spark-open", api_key=None, thresholds=str(thresholds),
                              gates=gate, reference_logprobs=str(ref_file) if reference else None,
                              reference_checkpoint=None, token_ids=None, needle_lengths=None, needle_depths=None,
                              timeout=60.0, json_out=str(tmp_path / "out.json"))


def test_every_gate_passes_on_a_good_server(ref, thresholds, tmp_path):
    lines = []
    with FakeServer(ref) as server:
        results = gates.run(args_for(server, thresholds, tmp_path), out=lines.append)
    assert [r.name for r in results] == list(gates.GATES)
    assert all(r.passed for r in results), "\n".join(lines)
    by = {r.name: r for r in results}
    assert abs(by["perplexity"].figure) < 1e-9 and by["decode_vs_prefill"].figure < 1e-4
    assert by["needles"].figure == 1.0 and by["tools"].figure == 3.0 and by["reasoning_effort"].figure == 41 / 9
    assert by["decode_speed"].figure > 100
    assert lines[-1] == "7/7 gates passed" and all(ln.startswith("PASS ") for ln in lines[:-1])
    assert "threshold" in lines[0] and json.loads((tmp_path / "out.json").read_text())[0]["name"] == "perplexity"


@pytest.mark.parametrize("gate,behaviour,detail", [
    ("perplexity", Behaviour(ppl_shift=-0.05), "served"),
    ("decode_vs_prefill", Behaviour(decode_shift=0.3), "greedy tokens"),
    ("needles", Behaviour(needle_miss_over=300), "missed 600@0.2, 600@0.8"),
    ("tools", Behaviour(required_ok=False), "required FAILED"),
    ("tools", Behaviour(stream_tools_ok=False), "streamed FAILED"),
    ("reasoning_effort", Behaviour(reasoning_high=9), "low 8 high 9"),
    ("reasoning_effort", Behaviour(answer_right=False), "answers right"),
    ("greedy_repeat", Behaviour(greedy_flaky=True), "first difference at token 4"),
    ("decode_speed", Behaviour(tps=25.0), "4 streams"),
])
def test_each_gate_fails_when_it_should(ref, thresholds, tmp_path, gate, behaviour, detail):
    lines = []
    with FakeServer(ref, behaviour) as server:
        (result,) = gates.run(args_for(server, thresholds, tmp_path, gate), out=lines.append)
    assert not result.passed and detail in result.detail, lines
    assert lines[0].startswith("FAIL ") and lines[-1] == "0/1 gates passed"


def test_perplexity_figure_is_relative_perplexity(ref, thresholds, tmp_path):
    with FakeServer(ref, Behaviour(ppl_shift=-0.01)) as server:
        (r,) = gates.run(args_for(server, thresholds, tmp_path, "perplexity"), out=lambda s: None)
    assert r.figure == pytest.approx(2.718281828 ** 0.01 - 1, rel=1e-6) and r.passed  # within 2 %


def test_perplexity_without_a_reference_fails_and_says_what_to_give(ref, thresholds, tmp_path):
    with FakeServer(ref) as server:
        (r,) = gates.run(args_for(server, thresholds, tmp_path, "perplexity", reference=False), out=lambda s: None)
    assert not r.passed and "--reference-logprobs" in r.detail


def test_stream_tool_calls_are_assembled_by_index():
    chunks = [{"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"name": "b", "arguments": "{\"x\""}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "{}"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": ": 1}"}}]}}]}]
    assert gates.assemble_stream_calls(chunks) == [("a", "{}"), ("b", '{"x": 1}')]


def test_decode_rate_and_logprob_picking():
    assert gates.decode_rate(11, 1.0, 2.0) == 10.0 and gates.decode_rate(1, 1.0, 2.0) == 0.0
    assert gates.logprobs_of([None, {"7": {"logprob": -1.5}}, {"9": {"logprob": -0.5}}], [3, 7, 9]) == [-1.5, -0.5]
    with pytest.raises(gates.EndpointError, match="no entry for token 9"):
        gates.logprobs_of([None, {"7": {"logprob": -1.5}}, {"8": {"logprob": -0.5}}], [3, 7, 9])


def test_main_exit_codes(ref, thresholds, tmp_path):
    assert gates.main(["--base-url", "http://127.0.0.1:9/v1", "--thresholds", str(thresholds), "--timeout", "2"]) == 2
    assert gates.main(["--thresholds", str(tmp_path / "none.json")]) == 2
    with FakeServer(ref, Behaviour(greedy_flaky=True)) as server:
        common = ["--base-url", server.url, "--thresholds", str(thresholds)]
        assert gates.main(common + ["--gates", "tools"]) == 0
        assert gates.main(common + ["--gates", "greedy_repeat"]) == 1


def test_run_gates_sh_against_the_fake_server(ref, thresholds):
    with FakeServer(ref) as server:
        r = subprocess.run(["bash", str(PORT / "tests" / "hpu" / "run_gates.sh"), "--base-url", server.url,
                            "--thresholds", str(thresholds), "--gates", "tools,greedy_repeat,needles"],
                           capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS  tools" in r.stdout and "PASS  needles" in r.stdout and "3/3 gates passed" in r.stdout
