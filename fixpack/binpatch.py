"""Git binary patches (``git diff --binary``, ``git format-patch --binary``): parsing their data and
applying it, both ways.

A file section with a binary change reads::

    diff --git a/x.bin b/x.bin
    index <pre-image blob id>..<post-image blob id> 100644
    GIT binary patch
    literal 18            (or: delta 21)  the forward block: the inflated size in bytes
    QcmZQz%u6l*&wxY...                    base85 lines, each led by its byte count (A-Z: 1-26, a-z: 27-52)
    <empty line>
    literal 0                             the reverse block (post-image back to pre-image)
    HcmV?d00001
    <empty line>

Each block's lines decode (base85, git's alphabet: RFC 1924's, as :func:`base64.b85decode` reads it) and
then inflate (zlib) to ``size`` bytes (inflating stops once past ``size``: a few KB can inflate to GBs).
A ``literal`` block is the whole other side; a ``delta`` block is git's delta encoding (gitformat-pack,
"Deltified representation"): the source's and the result's sizes as little-endian base-128 numbers, then
instructions: a byte with its top bit set copies a range of the source (its low four bits say which
offset bytes follow, the next three which size bytes; a size of 0 means 0x10000), any other non-zero
byte inserts that many bytes that follow. A copy of a few bytes can copy 16 MB of the source: a delta is
applied no further than the result size its header says (and no block may say more than ``MAX_BINARY_BYTES``).
The blocks of one patch file together inflate to no more than ``MAX_PATCH_BINARY_BYTES`` (each is held whole; a
delta's result, built when it is applied, counts as a block), and a
delta holds no more than ``MAX_DELTA_INSTRUCTIONS`` instructions (each is read in turn, in Python).

The ``index`` line must carry full blob ids (git writes them for binary changes; ``git apply`` also
refuses a binary patch without them): a side is recognised only by its id, git's object hash of the
bytes (``sha1("blob <size>\\0" + bytes)``, or sha256 in a sha256 repository).
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from typing import NoReturn

from .structs import dataclass

# The most bytes a block may say it gives (a literal's, a delta's data or its result): a fix pack's binary files are
# small (an icon, a test fixture; a patch file is capped at 64 MiB deflated), while a delta of a few KB can say GBs (a
# one-byte copy gives 64 KiB), held whole to apply. A large new file goes in the fix's folder as its [binary] source.
MAX_BINARY_BYTES = 256 << 20
# The most bytes all binary blocks of one patch file may inflate to together (each is held whole, parsed): a file at
# MAX_BINARY_BYTES replaced whole, both ways. Without it a 64 MiB patch could hold ~48 blocks of 1 GiB of zeros.
MAX_PATCH_BINARY_BYTES = 2 * MAX_BINARY_BYTES
# The most bytes the binary blocks of all patch files one load of a pack parses may inflate to together (each parsed
# patch is held): two patch files at MAX_PATCH_BINARY_BYTES.
MAX_PACK_BINARY_BYTES = 2 * MAX_PATCH_BINARY_BYTES
# The most instructions a delta may hold: each is read in turn, in Python (~10 million a second); a delta of 1-byte
# inserts at MAX_BINARY_BYTES holds 128 million. A whole file at MAX_BINARY_BYTES rewritten in git's 127-byte inserts
# takes 2.1 million.
MAX_DELTA_INSTRUCTIONS = 1 << 23
_BLOCK = re.compile(r"^(literal|delta) (\d+)$")
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(?: [0-7]+)?$")


class BinaryDataError(Exception):
    """A binary section that cannot be read: ``line`` is its 1-based line in the patch file."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class BinaryApplyError(Exception):
    """Binary data that does not fit the bytes it is applied to (the message says how)."""


def _mib(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and not n % (1 << 30) else f"{n >> 20} MiB" if not n % (1 << 20) else \
        f"{n} bytes"


class PackBudget:
    """The bytes of binary blocks the patch files one load of a pack has parsed hold (``MAX_PACK_BINARY_BYTES``)."""

    def __init__(self) -> None:
        self.used = 0


class Budget:
    """The bytes the binary blocks of one patch file may still inflate to (``MAX_PATCH_BINARY_BYTES`` in all), and
    with ``pack`` those of every patch file its pack's load parses (``MAX_PACK_BINARY_BYTES``; counted there by
    :meth:`done`, once the patch is parsed)."""

    def __init__(self, pack: PackBudget | None = None) -> None:
        self.used, self.pack = 0, pack

    def take(self, size: int, kind: str, line: int, what: str = "") -> None:
        """Count a block of ``size`` bytes (its ``kind`` line is ``line``) before it is inflated, or (``what``: its
        words) a delta's result before it is ever built; BinaryDataError there when it takes the patch's blocks past
        ``MAX_PATCH_BINARY_BYTES``, or the pack's past ``MAX_PACK_BINARY_BYTES``."""
        what = what or f"this {kind} block ({size} bytes)"
        do = "split the change into several patches, or put a large new file in the fix's folder as its [binary] source"
        if self.used + size > MAX_PATCH_BINARY_BYTES:
            raise BinaryDataError(line, f"{what} takes the patch's binary data to "
                                        f"{self.used + size} bytes, more than the {_mib(MAX_PATCH_BINARY_BYTES)} the "
                                        f"binary blocks of one patch file may have together (MAX_PATCH_BINARY_BYTES): "
                                        f"{do}")
        if self.pack is not None and self.pack.used + self.used + size > MAX_PACK_BINARY_BYTES:
            raise BinaryDataError(line, f"{what} takes the binary data of the pack's "
                                        f"patches to {self.pack.used + self.used + size} bytes, more than the "
                                        f"{_mib(MAX_PACK_BINARY_BYTES)} the binary blocks of a pack's patches may have "
                                        f"together (MAX_PACK_BINARY_BYTES): a fix pack carries small binary files; "
                                        f"{do}")
        self.used += size

    def done(self) -> None:
        """The patch is parsed: its blocks are held, and count against the pack's."""
        if self.pack is not None:
            self.pack.used += self.used


@dataclass(frozen=True)
class BinaryBlock:
    """One direction of a binary change: ``literal`` (the whole result) or ``delta``, inflated."""

    kind: str
    data: bytes


@dataclass(frozen=True)
class BinaryPatch:
    """A binary file's change: the blob ids of its two sides (all zeros: no file) and both blocks."""

    old_id: str
    new_id: str
    forward: BinaryBlock
    reverse: BinaryBlock

    def apply(self, current: bytes, reverse: bool = False) -> bytes:
        """The other side of ``current``. Raises BinaryApplyError when ``current`` is not the side the
        direction starts from, or the data does not give the side it ends at."""
        before, after = (self.new_id, self.old_id) if reverse else (self.old_id, self.new_id)
        block = self.reverse if reverse else self.forward
        have = blob_id(current, len(before))
        if not _is_side(current, before):
            raise BinaryApplyError(f"its bytes are not the binary {'post' if reverse else 'pre'}-image the patch "
                                   f"was made for (git blob {before[:12]}, found {have[:12]})")
        out = block.data if block.kind == "literal" else apply_delta(current, block.data)
        if not _is_side(out, after):
            raise BinaryApplyError(f"the patch's {block.kind} data does not give git blob {after[:12]} (got "
                                   f"{blob_id(out, len(after))[:12]}): the patch is damaged")
        return out


def _is_side(data: bytes, oid: str) -> bool:
    return data == b"" if set(oid) == {"0"} else blob_id(data, len(oid)) == oid


def blob_id(data: bytes, width: int = 40) -> str:
    """Git's object id of a blob holding ``data``: sha1 (40 hex digits) or sha256 (64)."""
    algo = hashlib.sha256 if width == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def parse_binary(lines: list[str], start: int, index: str | None, index_line: int,
                 budget: Budget | None = None) -> tuple[BinaryPatch, int]:
    """The binary change whose ``GIT binary patch`` line is ``lines[start]`` (0-based; the file's line
    ``start + 1``), with the section's ``index`` line; ``budget``: the patch file's (one for each patch file
    parsed). Returns it and the index of the first line after it. Raises BinaryDataError naming the line."""
    budget = budget or Budget()
    m = _INDEX.match(index or "")
    if not m or len(m.group(1)) not in (40, 64) or len(m.group(2)) != len(m.group(1)):
        raise BinaryDataError(index_line or start + 1, "a binary patch needs git's full 'index <blob>..<blob>' line "
                                                       "(git diff --binary writes it)")
    forward, pos = _block(lines, start + 1, budget)
    _check_literal(forward, m.group(2), start + 2)
    taken = _take_result(forward, start + 2, budget)
    if pos >= len(lines) or not _BLOCK.match(lines[pos]):
        raise BinaryDataError(pos + 1, "a binary patch without its reverse block (it could not be reverted)")
    reverse_line = pos + 1
    reverse, pos = _block(lines, pos, budget)
    _check_literal(reverse, m.group(1), reverse_line)
    _take_result(reverse, reverse_line, budget, taken)
    while pos < len(lines) and lines[pos] == "":
        pos += 1
    if pos < len(lines) and not lines[pos].startswith(("diff --git ", "-- ")) and lines[pos] != "--":
        raise BinaryDataError(pos + 1, "unexpected line after the binary data's two blocks")
    return BinaryPatch(m.group(1), m.group(2), forward, reverse), pos


def _check_literal(block: BinaryBlock, oid: str, line: int) -> None:
    """A literal block holds the whole side it ends at: its bytes must be the blob the index line names. A
    delta block must read as a delta (its source is known only at apply: what fits it is checked there)."""
    if block.kind == "literal" and not _is_side(block.data, oid):
        raise BinaryDataError(line, f"the literal data is git blob {blob_id(block.data, len(oid))[:12]}, the index "
                                    f"line says {oid[:12]}")
    if block.kind == "delta":
        try:
            check_delta(block.data)
        except BinaryApplyError as exc:
            raise BinaryDataError(line, str(exc)) from None


def _block(lines: list[str], pos: int, budget: Budget) -> tuple[BinaryBlock, int]:
    m = _BLOCK.match(lines[pos]) if pos < len(lines) else None
    if not m:
        raise BinaryDataError(pos + 1, "expected 'literal SIZE' or 'delta SIZE' after 'GIT binary patch'")
    if len(m.group(2)) > 18:  # past any file (and past what int() or zlib take: ValueError, OverflowError)
        raise BinaryDataError(pos + 1, f"the {m.group(1)} size has {len(m.group(2))} digits: no file is that large")
    head, size = pos + 1, int(m.group(2))
    if size > MAX_BINARY_BYTES:
        raise BinaryDataError(head, f"the {m.group(1)} size {size} is more than the {_mib(MAX_BINARY_BYTES)} a binary "
                                    f"block may have "
                                    f"(MAX_BINARY_BYTES): no file a fix carries is that large; if the patch is "
                                    f"damaged, regenerate it with git diff --binary")
    budget.take(size, m.group(1), head)
    pos += 1
    raw = bytearray()
    while pos < len(lines) and lines[pos] != "":
        raw += _line(lines[pos], pos + 1)
        pos += 1
    return BinaryBlock(m.group(1), _inflate(bytes(raw), size, m.group(1), head)), pos + 1


def _take_result(block: BinaryBlock, head: int, budget: Budget, taken: int = 0) -> int:
    """Count a delta block's result (its ``delta`` line is ``head``), read from its header before anything is built:
    applied, it is held as the file's bytes, as a literal's are. ``taken``: the result already counted for the other
    direction of the same file (one run builds one of them): only what this one needs more. Returns its size."""
    if block.kind != "delta":
        return 0
    try:
        result = delta_sizes(block.data)[1]
    except BinaryApplyError as exc:
        raise BinaryDataError(head, str(exc)) from None
    if taken < result <= MAX_BINARY_BYTES:  # (past the cap: refused by the delta's check, in its own words)
        budget.take(result - taken, "delta", head, f"this delta block's result ({result} bytes, its header says)")
    return result


def _inflate(raw: bytes, size: int, kind: str, head: int) -> bytes:
    """``raw`` inflated (zlib), which must give exactly ``size`` bytes (the ``literal``/``delta`` line's, at line
    ``head``). Inflates at most ``size + 1`` bytes: data that would give more (a few KB of zeros can inflate to
    GBs) is refused once it passes ``size``, never held whole. Raises BinaryDataError naming ``head``."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(raw, size + 1)
    except zlib.error as exc:
        raise BinaryDataError(head, f"the {kind} data does not inflate ({exc})") from exc
    if len(data) > size:
        raise BinaryDataError(head, f"the {kind} data inflates to more than the {size} bytes its line says (inflating "
                                    f"stopped there)")
    if not inflater.eof:
        raise BinaryDataError(head, f"the {kind} data does not inflate (the zlib stream is cut short)")
    if inflater.unused_data:
        raise BinaryDataError(head, f"the {kind} data has {len(inflater.unused_data)} bytes after its zlib stream")
    if len(data) != size:
        raise BinaryDataError(head, f"the {kind} data inflates to {len(data)} bytes, its line says {size}")
    return data


def literal_block(data: bytes) -> str:
    """``data`` as a ``literal`` block, as ``git diff --binary`` writes one: the size line, then the deflated
    bytes in base85 lines of up to 52 bytes each (led by their count), then the empty line that ends it."""
    packed = zlib.compress(data, 9)
    lines = [f"literal {len(data)}"]
    for i in range(0, len(packed), 52):
        chunk = packed[i:i + 52]
        lead = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        lines.append(lead + base64.b85encode(chunk, pad=True).decode("ascii"))
    return "\n".join(lines) + "\n\n"


def new_file_patch(path: str, data: bytes, mode: str = "100644") -> str:
    """The ``git diff --binary`` section that creates ``path`` holding ``data``: full blob ids on the
    ``index`` line, the forward block the whole file, the reverse block empty."""
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex {'0' * 40}..{blob_id(data)}\n"
            f"GIT binary patch\n{literal_block(data)}{literal_block(b'')}")


def _line(text: str, n: int) -> bytes:
    """One base85 line: its first character is the byte count (A-Z: 1-26, a-z: 27-52), then 5
    characters per 4 bytes."""
    lead = text[:1]
    count = ord(lead) - ord("A") + 1 if "A" <= lead <= "Z" else ord(lead) - ord("a") + 27 if "a" <= lead <= "z" else 0
    body = text[1:]
    if count == 0 or len(body) != (count + 3) // 4 * 5:
        raise BinaryDataError(n, "not a line of base85 binary data (its length does not match its lead character)")
    try:
        return base64.b85decode(body)[:count]
    except ValueError as exc:
        raise BinaryDataError(n, f"not a line of base85 binary data ({exc})") from exc


def apply_delta(source: bytes, delta: bytes) -> bytes:
    """``source`` changed by a git delta. Raises BinaryApplyError when the delta does not fit it: its header's
    source size is not ``source``'s (told before anything is built), a copy lies outside ``source``, or the result
    would pass the size its header says (refused there, never built further) or falls short of it."""
    return bytes(_walk(delta, source))


def check_delta(delta: bytes) -> None:
    """Raises BinaryApplyError when ``delta`` cannot be a git delta, read without its source (nothing is built):
    it ends inside an instruction, holds the reserved instruction 0 or more than ``MAX_DELTA_INSTRUCTIONS``, copies
    past the source's size, says a result of more than ``MAX_BINARY_BYTES``, or gives another size than its header
    says."""
    _walk(delta, None)


def delta_sizes(delta: bytes) -> tuple[int, int]:
    """The source's and the result's sizes in bytes a git delta's header says."""
    try:
        src_size, dst_size, _pos = _header(delta)
    except IndexError:
        raise BinaryApplyError("the delta data ends in the middle of its header: the patch is damaged") from None
    return src_size, dst_size


def _walk(delta: bytes, source: bytes | None) -> bytearray:
    """Each instruction of ``delta`` checked in turn (none is listed; past ``MAX_DELTA_INSTRUCTIONS``, refused), and
    with ``source`` its result built (else nothing: empty). The result is never built past the size the header says."""
    try:
        return _run(delta, source)
    except IndexError:
        raise BinaryApplyError("the delta data ends in the middle of an instruction: the patch is damaged") from None


def _header(delta: bytes) -> tuple[int, int, int]:
    src_size, pos = _varint(delta, 0)
    dst_size, pos = _varint(delta, pos)
    return src_size, dst_size, pos


def _run(delta: bytes, source: bytes | None) -> bytearray:
    src_size, dst_size, pos = _header(delta)
    if dst_size > MAX_BINARY_BYTES:
        raise BinaryApplyError(f"the delta's header says it gives {dst_size} bytes, more than the "
                               f"{_mib(MAX_BINARY_BYTES)} a binary block may have (MAX_BINARY_BYTES): no file a fix "
                               f"carries is that large")
    if source is not None and src_size != len(source):
        raise BinaryApplyError(f"the delta is for {src_size} bytes, the file has {len(source)}")
    out = bytearray()
    total, end = 0, len(delta)
    for _n in range(MAX_DELTA_INSTRUCTIONS):
        if pos >= end:
            break
        op = delta[pos]
        pos += 1
        if 0 < op < 0x80:  # an insert of the op bytes that follow (the last one checked against the end below)
            pos += op
            total += op
            if total > dst_size:
                _past(dst_size)
            if source is not None:
                out += delta[pos - op:pos]
            continue
        if not op:
            raise BinaryApplyError("the delta holds instruction 0 (reserved): the patch is damaged")
        start, pos = _packed(delta, pos, op, 4)
        size, pos = _packed(delta, pos, op >> 4, 3)
        size = size or 0x10000
        if start + size > src_size:
            raise BinaryApplyError(f"the delta copies bytes {start}-{start + size} of a {src_size}-byte file")
        total += size
        if total > dst_size:
            _past(dst_size)
        if source is not None:
            out += memoryview(source)[start:start + size]
    else:
        if pos < end:
            raise BinaryApplyError(f"the delta holds more than {MAX_DELTA_INSTRUCTIONS} instructions "
                                   f"(MAX_DELTA_INSTRUCTIONS): git writes a few per changed stretch of a file, no "
                                   f"file a fix carries needs that many; regenerate it with git diff --binary")
    if pos > end:
        raise IndexError(pos)
    if total != dst_size:
        raise BinaryApplyError(f"the delta gives {total} bytes, its header says {dst_size}")
    return out


def _past(dst_size: int) -> NoReturn:
    raise BinaryApplyError(f"the delta gives more than the {dst_size} bytes its header says (refused there, before "
                           f"building more)")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A size in the delta's header: 7 bits a byte, least significant first, top bit = more follow."""
    value = shift = 0
    while True:
        if shift > 63:  # past any size (git's are 64-bit): a long run of such bytes would be slow to add up
            raise BinaryApplyError("the delta's header holds a size of more than 64 bits: the patch is damaged")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _packed(data: bytes, pos: int, bits: int, count: int) -> tuple[int, int]:
    """A copy instruction's offset (4 bytes) or size (3): bit i of ``bits`` says byte i follows."""
    value = 0
    for i in range(count):
        if bits & (1 << i):
            value |= data[pos] << (8 * i)
            pos += 1
    return value, pos
