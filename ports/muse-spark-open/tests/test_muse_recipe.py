"""recipes/amd/Muse-Spark-Open-816B-A42B-Quark-MXFP4/recipe.yaml: complete, consistent with the
port, the bucket file, the profile and the fixes, and accepted by vLLM's own command line."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import copy

import pytest

from muse_testutil import REPO
from muse_spark_open import recipe as rc

RECIPE = REPO / "recipes" / "amd" / "Muse-Spark-Open-816B-A42B-Quark-MXFP4" / "recipe.yaml"


@pytest.fixture(scope="module")
def recipe():
    return rc.load(RECIPE)


def test_recipe_is_consistent(recipe):
    assert rc.check(recipe, REPO) == []
    assert recipe["model"]["id"] == "amd/Muse-Spark-Open-816B-A42B-Quark-MXFP4"
    assert recipe["hardware"] == {"accelerator": "Gaudi 2", "cards": 8, "nodes": 1, "memory_per_card_gib": 96}
    assert recipe["parsers"] == {"reasoning": "muse", "tool": "muse", "enable_auto_tool_choice": True}
    # the experts are served as EP2 x TP4 (issue #18), and the port is told so
    assert recipe["parallelism"] == {"tensor_parallel_size": 8, "expert_parallel": 2, "expert_tensor_parallel": 4}
    assert recipe["environment"]["MUSE_SPARK_MOE_TP_SPLIT"] == "4"
    assert "export MUSE_SPARK_MOE_TP_SPLIT=4" in rc.launch_lines(recipe)


@pytest.mark.parametrize("mutate,problem", [
    (lambda r: r["launch"]["args"].remove("--language-model-only"), "--language-model-only"),
    (lambda r: r["concurrency"].__setitem__("max_num_seqs", 8), "--max-num-seqs"),
    (lambda r: r["environment"].__setitem__("MUSE_SPARK_MXFP4_KERNELS", "on"), "MUSE_SPARK_MXFP4_KERNELS"),
    (lambda r: r["environment"].__setitem__("VLLM_LONG_PREFILL_SHARE", "0.5"), "VLLM_LONG_PREFILL_SHARE"),
    (lambda r: r["image"]["pins"]["vllm"].__setitem__("commit", "deadbeef"), "pin vllm.commit"),
    (lambda r: r["image"]["opt_in_fixes"].append("no-such-fix"), "no-such-fix"),
    (lambda r: r["context"].__setitem__("kv_pool_blocks", 9000), "pool_blocks"),
    (lambda r: r["model"].__setitem__("experts", 128), "model.experts"),
    (lambda r: r.pop("precision"), "missing sections: precision"),
    (lambda r: r["environment"].pop("MUSE_SPARK_MOE_TP_SPLIT"), "MUSE_SPARK_MOE_TP_SPLIT=1 but"),
    (lambda r: r["environment"].__setitem__("MUSE_SPARK_MOE_TP_SPLIT", "2"), "MUSE_SPARK_MOE_TP_SPLIT=2 but"),
    (lambda r: r["parallelism"].__setitem__("expert_parallel", 4), "expert_parallel 4 x expert_tensor_parallel 4"),
])
def test_a_broken_recipe_is_caught(recipe, mutate, problem):
    r = copy.deepcopy(recipe)
    mutate(r)
    assert any(problem in p for p in rc.check(r, REPO)), rc.check(r, REPO)


def test_launch_args_parse_with_vllm_and_name_registered_parsers(recipe):
    pytest.importorskip("vllm")
    try:  # vLLM 0.33.0 moved the serve arguments to entrypoints.common
        from vllm.entrypoints.common.cli_args import (
            make_arg_parser,
            validate_api_server_args,
            validate_parsed_serve_args,
        )
    except ImportError:  # 0.30.0 to 0.32.0
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
        from vllm.entrypoints.launchers.launcher import validate_api_server_args
    from vllm.reasoning import ReasoningParserManager

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # pragma: no cover
        from vllm.utils import FlexibleArgumentParser
    from muse_spark_open.plugin import register

    register()
    args = make_arg_parser(FlexibleArgumentParser()).parse_args([str(a) for a in recipe["launch"]["args"]])
    validate_parsed_serve_args(args)
    validate_api_server_args(args)  # the tool parser name is registered
    assert args.reasoning_parser in ReasoningParserManager.list_registered()
    assert args.language_model_only and args.tensor_parallel_size == 8
    assert args.max_model_len == 262_144 and args.num_gpu_blocks_override == 10_752 and args.block_size == 128


def test_launch_command_renders(recipe):
    lines = rc.launch_lines(recipe)
    assert lines[-1].startswith("vllm serve amd/Muse-Spark-Open-816B-A42B-Quark-MXFP4 --language-model-only")
    assert "export VLLM_LONG_PREFILL_SHARE=0.25" in lines
