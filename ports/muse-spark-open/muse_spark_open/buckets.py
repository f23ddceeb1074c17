"""Bucket files in the vllm-gaudi format, and the memory arithmetic of a bucket set.

A line is ``(batch, query, context)``; a field is an integer, a list ``[a, b, ...]`` or
``range(start, stop[, step])`` (stop excluded, as in Python), and the line stands for every
combination. ``#`` starts a comment. A bucket with query 1 is a decode bucket (context: total blocks
of the batch); the others are prompt buckets (context: blocks already cached).
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

Bucket = tuple[int, int, int]


class BucketFileError(ValueError):
    pass


def _field(node: ast.expr, where: str) -> list[int]:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return [node.value]
    if isinstance(node, ast.List):
        return [v for elt in node.elts for v in _field(elt, where)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        args = [_field(a, where) for a in node.args]
        if node.keywords or not 1 <= len(args) <= 3 or any(len(a) != 1 for a in args):
            raise BucketFileError(f"{where}: range takes 1 to 3 integers")
        vals = list(range(*(a[0] for a in args)))
        if not vals:
            raise BucketFileError(f"{where}: empty range")
        return vals
    raise BucketFileError(f"{where}: a field is an integer, a list or range(...), not {ast.unparse(node)!r}")


def parse_line(text: str, where: str = "line") -> list[Bucket]:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise BucketFileError(f"{where}: not a (batch, query, context) tuple: {text.strip()!r}") from e
    if not isinstance(node, ast.Tuple) or len(node.elts) != 3:
        raise BucketFileError(f"{where}: expected (batch, query, context), got {text.strip()!r}")
    fields = [_field(e, where) for e in node.elts]
    for name, vals in zip(("batch", "query", "context"), fields):
        low = 0 if name == "context" else 1
        if any(v < low for v in vals):
            raise BucketFileError(f"{where}: {name} values must be >= {low}")
    return [tuple(b) for b in itertools.product(*fields)]  # type: ignore[misc]


@dataclass
class BucketFile:
    buckets: list[Bucket]
    checks: dict[str, float]

    @property
    def decode(self) -> list[Bucket]:
        return sorted({b for b in self.buckets if b[1] == 1})

    @property
    def prompt(self) -> list[Bucket]:
        return sorted({b for b in self.buckets if b[1] != 1})


def parse_text(text: str) -> BucketFile:
    buckets: list[Bucket] = []
    checks: dict[str, float] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#"):
            m = re.match(r"#\s*check:\s*(.*)$", line)
            if m:
                for kv in m.group(1).split():
                    k, _, v = kv.partition("=")
                    checks[k] = float(v)
            continue
        line = line.split("#", 1)[0].strip()
        if line:
            buckets.extend(parse_line(line, f"line {n}"))
    return BucketFile(buckets, checks)


def parse_file(path: str | Path) -> BucketFile:
    return parse_text(Path(path).read_text())


def kv_bytes_per_block(num_global_layers: int, num_kv_heads: int, head_dim: int, cards: int,
                       block_size: int, dtype_bytes: int = 2) -> int:
    """Bytes a KV block costs on one card with window-sized KV (only global layers are full-length)."""
    kv_heads_per_card = max(1, num_kv_heads // cards)
    return num_global_layers * 2 * kv_heads_per_card * head_dim * dtype_bytes * block_size
