"""serving/buckets-256k-seqs4.txt: parses in the vllm-gaudi format and its arithmetic holds."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import pytest

from muse_testutil import PORT
from muse_spark_open import buckets as bk
from muse_spark_open.config import MuseSparkTextConfig

FILE = PORT / "serving" / "buckets-256k-seqs4.txt"
MIB = 1 << 20


@pytest.fixture(scope="module")
def bf():
    return bk.parse_file(FILE)


def test_parses_lists_ranges_and_integers():
    assert bk.parse_line("(1, [2, 3], range(0, 6, 2))") == [(1, 2, 0), (1, 2, 2), (1, 2, 4), (1, 3, 0), (1, 3, 2), (1, 3, 4)]
    assert bk.parse_line("(4, 1, 8192)") == [(4, 1, 8192)]
    assert bk.parse_line("([1, 2], 1, range(3))") == [(1, 1, 0), (1, 1, 1), (1, 1, 2), (2, 1, 0), (2, 1, 1), (2, 1, 2)]
    for bad in ("(1, 2)", "(1, 2, x)", "(1, 2, range(5, 5))", "(0, 1, 4)", "1, 2, __import__('os')"):
        with pytest.raises(bk.BucketFileError):
            bk.parse_line(bad)


def test_every_check_line_is_recomputed(bf):
    c = bf.checks
    block, max_len, seqs, pool = int(c["block_size"]), int(c["max_model_len"]), int(c["max_num_seqs"]), int(c["pool_blocks"])
    assert max_len == 262_144 and seqs == 4 and pool == 10_752  # 256K, 4 sequences, the seed's pool
    assert c["blocks_per_seq"] == max_len // block == 2048
    assert c["context_blocks"] == seqs * max_len // block == 8192
    assert pool * block >= seqs * max_len  # the pool holds 4 x 256K tokens
    assert c["spare_blocks"] == pool - c["context_blocks"] == 2560
    assert c["pool_mib"] == pool * c["kv_mib_per_block"] == 10_752
    decode = bf.decode
    assert c["decode_buckets"] == len(decode) == 11
    assert c["decode_graph_blocks"] == sum(ctx for _, _, ctx in decode) == 24_128
    assert c["decode_graph_mib"] == c["graph_mib_per_block"] * c["decode_graph_blocks"] == 12_064
    assert c["decode_graph_mib"] <= c["graph_budget_mib"]


def test_a_block_costs_one_mib_a_card_with_window_sized_kv():
    d = MuseSparkTextConfig()
    per_card = bk.kv_bytes_per_block(d.num_global_layers, d.num_key_value_heads, d.head_dim, cards=8, block_size=128)
    assert per_card == 1 * MIB
    all_layers = bk.kv_bytes_per_block(d.num_hidden_layers, d.num_key_value_heads, d.head_dim, cards=8, block_size=128)
    assert all_layers / per_card == 3.875  # full-length KV on every layer: 3.875x fewer tokens


def test_decode_buckets_fit_the_batch_and_the_pool(bf):
    c = bf.checks
    per_seq = int(c["blocks_per_seq"])
    for b, q, ctx in bf.decode:
        assert q == 1 and 1 <= b <= c["max_num_seqs"]
        assert b <= ctx <= min(b * per_seq, c["pool_blocks"]), (b, ctx)
    assert max(ctx for _, _, ctx in bf.decode) == c["context_blocks"]  # 4 full sequences are captured
    assert {b for b, _, _ in bf.decode} == {1, 2, 4}


def test_prompt_buckets_stay_inside_the_context_and_the_budget(bf):
    c = bf.checks
    for b, q, ctx in bf.prompt:
        assert b == 1 and q <= c["max_num_batched_tokens"]
        assert q + ctx * c["block_size"] <= c["max_model_len"], (q, ctx)
    # the last chunk of a 256K prompt has a bucket at every chunk size the scheduler uses
    for q, key in ((2048, "prompt_max_context_q2048"), (8192, "prompt_max_context_q8192")):
        top = max(ctx for _, qq, ctx in bf.prompt if qq == q)
        assert top == c[key] == (c["max_model_len"] - q) // c["block_size"]


def test_comments_show_the_same_figures(bf):
    text = FILE.read_text()
    for figure in ("2,048 blocks", "8,192 blocks", "10,752", "1 MiB", "0.5 MiB", "24,128 blocks", "12,064 MiB", "2,560 blocks"):
        assert figure in text
