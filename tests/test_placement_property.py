"""Property: on a drifted file, a hunk lands at its true place or nowhere, and is never refused when
its place is certain.

A file is a run of blocks drawn from a few templates (so twins are common) with unique filler lines
between them. A fix changes the middle line of one or two blocks (its hunks' context stays inside the
block). The image is that file after random upstream drift: twins inserted (plain, or carrying the
fix's own change), blocks moved, filler inserted, other blocks deleted. Every block keeps its
identity through the drift, which gives the truth: the block the fix was written for (but where the drift
leaves the release's very bytes, two twins swapped, that is the release, and the truth its stated lines; where it
leaves the fix's very post-image, a patched twin in the true block's place, the fix is in). Deleting the
true block is not among the drifts: with a twin inserted elsewhere it reads exactly like a move, and
no tool can tell them apart from the text.

The engine applies through the public entry (pack, lock, apply) and must either produce the file with
the change on the true blocks, or refuse (exit 4) with every byte left as it was. When the image is
the release copy itself, or every changed block's template occurs once in the release and once in
the image with no copy of the change elsewhere, it must apply.
"""

import difflib
import random

from conftest import HEADER, PackBuilder, snapshot, toml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fixpack import engine
from fixpack.errors import EXIT_CONFLICT

MOD = "demo_pkg/mod.py"
TEMPLATES = 6
BLOCK_LINES = 9
MIDDLE = 4  # the changed line: 3 lines of context each side stay inside the block


def template(k: int) -> list[str]:
    return [f"def t{k}():\n"] + [f"    v{i} = {k} * {i}\n" for i in range(1, BLOCK_LINES - 1)] + ["    return v1\n"]


class Block:
    """One block of the file; ``true`` marks the blocks the fix was written for (by identity)."""

    def __init__(self, kind: int, lines: list[str], true: bool = False, filler: bool = False) -> None:
        self.kind, self.lines, self.true, self.filler = kind, lines, true, filler


def changed(lines: list[str]) -> list[str]:
    out = list(lines)
    out[MIDDLE] = out[MIDDLE].rstrip("\n") + "  # fixed\n"
    return out


def text(blocks: list[Block], patched: bool = False) -> str:
    return "".join("".join(changed(b.lines) if patched and b.true else b.lines) for b in blocks)


@st.composite
def scenario(draw):
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    n = rng.randint(3, 8)
    blocks: list[Block] = []
    filler = 0
    for _ in range(n):
        if rng.random() < 0.5:
            filler += 1
            blocks.append(Block(-1, [f"u{filler} = {filler}\n"], filler=True))
        k = rng.randrange(TEMPLATES)
        blocks.append(Block(k, template(k)))
    real = [b for b in blocks if not b.filler]
    for b in rng.sample(real, rng.choice([1, 1, 2])):
        b.true = True
    drifted = list(blocks)
    ops = []
    for _ in range(rng.choice([0, 1, 2, 2, 3, 4])):
        op = rng.choice(["twin", "twin", "patched-twin", "move", "filler", "delete"])
        pos = rng.randint(0, len(drifted))
        if op in ("twin", "patched-twin"):
            src = rng.choice([b for b in drifted if not b.filler])
            lines = changed(src.lines) if op == "patched-twin" and src.true else list(src.lines)
            drifted.insert(pos, Block(src.kind, lines))
        elif op == "move":
            b = drifted.pop(rng.randrange(len(drifted)))
            drifted.insert(rng.randint(0, len(drifted)), b)
        elif op == "filler":
            filler += 1
            drifted.insert(pos, Block(-1, [f"u{filler} = drift\n"], filler=True))
        else:
            others = [i for i, b in enumerate(drifted) if not b.true]
            if others:
                drifted.pop(rng.choice(others))
        ops.append(op)
    return blocks, drifted, ops


def certain(blocks: list[Block], drifted: list[Block]) -> bool:
    """Every changed block's template occurs once in the release and once in the image, and the change
    itself appears nowhere else: the one place is certain."""
    kinds = [b.kind for b in blocks if b.true]
    if len(set(kinds)) != len(kinds):
        return False
    for k in kinds:
        if sum(b.kind == k for b in blocks) != 1 or sum(b.kind == k for b in drifted) != 1:
            return False
    return not any("# fixed" in line for b in drifted for line in b.lines)


def make_pack(base, before: str, after: str) -> PackBuilder:
    b = PackBuilder(base)
    folder = b.pack / "fixes" / "one"
    folder.mkdir(parents=True)
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{MOD}", f"b/{MOD}", n=3))
    (folder / "0001-change.patch").write_text(HEADER.format(summary="one") + f"diff --git a/{MOD} b/{MOD}\n" + diff)
    (folder / "fix.toml").write_text(toml({"id": "one", "version": 1, "summary": "fix one", "why": "a test symptom",
                                           "target": "demo", "patches": ["0001-change.patch"]}))
    b.series.append("one")
    b.write_series()
    b.profile(["one"])
    return b


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=scenario())
def test_a_hunk_lands_at_its_true_place_or_nowhere(tmp_path_factory, case):
    blocks, drifted, ops = case
    base = tmp_path_factory.mktemp("case")
    b = make_pack(base, text(blocks), text(blocks, patched=True))
    b.lock(b.tree("clean", {MOD: text(blocks)}))
    image = b.tree("image", {MOD: text(drifted)})
    before = snapshot(image)
    r = engine.apply(b.request(image))
    event(f"{'applied' if r.exit_code == 0 else 'refused'} ({'no drift' if not ops else 'certain' if certain(blocks, drifted) else 'twins'})")
    if r.exit_code == 0:  # (a drift that leaves the release's very bytes, or the fix's post-image, is that file)
        want = {text(blocks): text(blocks, patched=True), text(blocks, patched=True): text(blocks, patched=True)
                }.get(text(drifted), text(drifted, patched=True))
        assert (image / MOD).read_text() == want, f"misplaced after {ops}"
    else:
        assert r.exit_code == EXIT_CONFLICT, (r.exit_code, r.error)
        assert r.fixes[0].state in ("ambiguous", "conflict", "partial")
        assert snapshot(image) == before
    if not ops or certain(blocks, drifted):
        assert r.exit_code == 0, f"refused a certain place after {ops}: {r.fixes[0].messages}"
