"""Git binary patches (git diff --binary: literal and delta blocks, both ways) on declared binary
paths: applied, recognised as applied, reverted byte for byte, locked and journalled like any file;
an undeclared binary, damaged data or other bytes in the image are refused with what to do."""

import hashlib
import json
import random

import pytest
from conftest import git, snapshot

from fixpack import engine
from fixpack.binpatch import BinaryApplyError, apply_delta
from fixpack.errors import BadInputError, PackError, StaleLockError

rng = random.Random(15)
BIG = bytes(rng.getrandbits(8) for _ in range(200_000))  # > 0x10000: copies past 64 KiB in the delta
SMALL = bytes(range(256)) * 4


def _edited(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


BEFORE = {"demo_pkg/big.bin": BIG, "demo_pkg/small.bin": SMALL, "demo_pkg/gone.bin": b"\x00\x01gone\xff" * 50}
AFTER = {"demo_pkg/big.bin": _edited(BIG, 150_000, b"\x00PATCHED\x00"),             # delta
         "demo_pkg/small.bin": bytes(rng.getrandbits(8) for _ in range(300)),      # literal (all new bytes)
         "demo_pkg/new.bin": b"\x89PNG\r\n\x1a\n" + bytes(range(200)),            # a new file
         "demo_pkg/gone.bin": None}                                               # a deleted one


def _binary_diff(tmp, before, after):
    repo = tmp / "binrepo"
    (repo / "demo_pkg").mkdir(parents=True)
    git(repo, "init", "-q")
    for p, data in before.items():
        (repo / p).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for p, data in after.items():
        (repo / p).unlink() if data is None else (repo / p).write_bytes(data)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "--binary")


@pytest.fixture
def setup(builder, tmp_path):
    diff = _binary_diff(tmp_path, BEFORE, AFTER)
    assert "delta " in diff and "literal " in diff
    clean = builder.tree("clean", {})
    for p, data in BEFORE.items():
        (clean / p).write_bytes(data)
    folder = builder.add_fix("bins", {}, {}, diff=diff)
    with (folder / "fix.toml").open("a") as f:
        f.write("[binary]\n" + "".join(f'"{p}" = "patch"\n' for p in AFTER))
    builder.profile(["bins"])
    builder.lock(clean)
    image = builder.tree("image", {})
    for p, data in BEFORE.items():
        (image / p).write_bytes(data)
    return builder, image


def test_apply_status_reapply_revert(setup):
    b, image = setup
    original = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.ok and r.fix("bins").state == "absent" and r.fix("bins").action == "applied"
    for p, data in AFTER.items():
        assert (image / p).read_bytes() == data if data is not None else not (image / p).exists()
    applied = snapshot(image)
    lock = json.loads((b.pack / "profiles/p1.lock").read_text())["fixes"][0]
    manifest = json.loads((image / ".fixpack/demo.manifest.json").read_text())
    for p, data in AFTER.items():  # locked and recorded like any file: the sha256 of its bytes
        sha = hashlib.sha256(data).hexdigest() if data is not None else None
        assert {f["path"]: f["post"] for f in lock["files"]}[p] == manifest["files"][p] == sha
    assert engine.status(b.request(image)).fix("bins").state == "applied"
    again = engine.apply(b.request(image))
    assert again.ok and again.fix("bins").action == "none" and snapshot(image) == applied
    assert engine.revert(b.request(image)).ok
    assert snapshot(image) == original


def test_other_bytes_in_the_image_are_a_conflict(setup):
    b, image = setup
    (image / "demo_pkg/big.bin").write_bytes(_edited(BIG, 10, b"local"))
    before = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.exit_code == 4 and r.fix("bins").state == "conflict"
    assert "demo_pkg/big.bin: its bytes are not the binary pre-image" in " ".join(r.fix("bins").messages)
    assert snapshot(image) == before


def test_an_undeclared_binary_is_refused_with_how_to_declare_it(setup):
    b, image = setup
    toml = b.pack / "fixes/bins/fix.toml"
    toml.write_text(toml.read_text().replace('"demo_pkg/new.bin" = "patch"\n', ""))
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(image))
    found = [str(p) for p in exc.value.problems]
    assert any("demo_pkg/new.bin is a binary file" in p and '[binary] "demo_pkg/new.bin" = "patch"' in p
               for p in found), found


def test_damaged_binary_data_is_bad_input(setup):
    b, image = setup
    patch = b.pack / "fixes/bins/0001-change.patch"
    lines = patch.read_text().split("\n")
    n = next(i for i, ln in enumerate(lines) if ln.startswith("literal ")) + 1
    lines[n] = lines[n][:3] + ("0" if lines[n][3] != "0" else "1") + lines[n][4:]
    patch.write_text("\n".join(lines))
    with pytest.raises(PackError, match=f":{n + 1}: the literal data does not inflate|:{n}: the literal data"):
        engine.apply(b.request(image))


def test_literal_data_that_is_not_the_index_lines_blob_is_bad_input(setup):
    # the data inflates to the right size, but is not the blob the index line names: a damaged patch,
    # refused when the pack is read (exit 2, file:line), not found later as a conflict on the image
    b, image = setup
    patch = b.pack / "fixes/bins/0001-change.patch"
    lines = patch.read_text().split("\n")
    lit = next(i for i, ln in enumerate(lines) if ln.startswith("literal "))
    n = max(i for i in range(lit) if lines[i].startswith("index "))  # the section of a literal block
    ids = lines[n].split(" ")[1].split("..")
    flip = [("1" if i[0] == "0" else "0") + i[1:] if set(i) != {"0"} else i for i in ids]
    lines[n] = lines[n].replace("..".join(ids), "..".join(flip))
    patch.write_text("\n".join(lines))
    with pytest.raises(PackError, match=r":\d+: the literal data is git blob [0-9a-f]{12}, the index line says"):
        engine.apply(b.request(image))


def test_without_the_full_index_line_a_binary_patch_is_refused(setup):
    b, image = setup
    patch = b.pack / "fixes/bins/0001-change.patch"
    text = patch.read_text()
    patch.write_text("\n".join(ln for ln in text.split("\n") if not ln.startswith("index ")))
    with pytest.raises(PackError, match="needs git's full 'index <blob>..<blob>' line"):
        engine.apply(b.request(image))


def test_a_delta_that_does_not_fit_its_source():
    delta = bytes([4, 2, 0x91, 1, 2])  # source 4 bytes, result 2: copy 2 bytes from offset 1
    assert apply_delta(b"abcd", delta) == b"bc"
    with pytest.raises(BinaryApplyError, match="for 4 bytes, the file has 3"):
        apply_delta(b"abc", delta)
    with pytest.raises(BinaryApplyError, match="instruction 0"):
        apply_delta(b"abcd", bytes([4, 2, 0]))
    with pytest.raises(BinaryApplyError, match="ends in the middle"):
        apply_delta(b"abcd", bytes([4, 2, 0x91, 1]))


def test_format_keeps_the_binary_data_and_its_index_line(setup):
    """`fixpack format` drops text sections' index lines (churn) but keeps a binary section's: its blob
    ids are how each side is recognised; the lock stays fresh and the fix still applies."""
    from fixpack.loader import load_pack
    from fixpack.pack_tools import rewrite_patches

    b, image = setup
    patch = b.pack / "fixes/bins/0001-change.patch"
    before = patch.read_text()
    rewrite_patches(load_pack(b.pack))
    after = patch.read_text()
    assert [ln for ln in after.split("\n") if ln.startswith("index ")] == \
        [ln for ln in before.split("\n") if ln.startswith("index ")]
    assert engine.apply(b.request(image)).ok


NEW_FROM_SOURCE = ("diff --git a/demo_pkg/logo.bin b/demo_pkg/logo.bin\nnew file mode 100644\n"
                   "index 0000000..1111111\nBinary files /dev/null and b/demo_pkg/logo.bin differ\n")


@pytest.fixture
def sourced(builder):
    """A fix whose new binary file's bytes come from a file of its folder ([binary] "path" = "logo.bin")."""
    clean = builder.tree("clean", {})
    folder = builder.add_fix("logo", {}, {}, diff=NEW_FROM_SOURCE)
    with (folder / "fix.toml").open("a") as f:
        f.write('[binary]\n"demo_pkg/logo.bin" = "logo.bin"\n')
    (folder / "logo.bin").write_bytes(b"\x00first\xff")
    builder.profile(["logo"])
    builder.lock(clean)
    image = builder.tree("image", {})
    assert engine.apply(builder.request(image)).ok
    return builder, folder, clean, image


def test_a_binary_source_edited_without_a_new_lock_makes_the_lock_stale(sourced):
    """The file in the fix's folder is the change's data: edited, the lock no longer describes the fix (it
    said 'fresh', status said 'applied' and apply 'tampered' about the same image)."""
    b, folder, _clean, image = sourced
    (folder / "logo.bin").write_bytes(b"\x00second\xff")
    before = snapshot(image)
    for run in (engine.status, engine.apply):
        with pytest.raises(StaleLockError, match="logo: patch or version changed since the lock was generated"):
            run(b.request(image))
    assert snapshot(image) == before


def test_a_binary_source_edited_and_locked_is_another_change_than_the_recorded_one(sourced):
    b, folder, clean, image = sourced
    (folder / "logo.bin").write_bytes(b"\x00second\xff")
    b.lock(clean)
    with pytest.raises(BadInputError, match="records logo v1 on target demo, applied with another patch than this pack.s v1"):
        engine.revert(b.request(image))
    assert (image / "demo_pkg/logo.bin").read_bytes() == b"\x00first\xff"


def test_a_variant_takes_its_binary_source_from_the_fix_folder(sourced):
    """A variant (fixes/<id>/<profile>/) shares fix.toml's [binary] table: its source is the fix's own
    file, as the evaluation and the fingerprints read it; the loader looked for it in the variant's folder
    (declared content 'missing') and the profile could not be applied at all."""
    b, folder, clean, _image = sourced
    variant = folder / "p2"
    variant.mkdir()
    (variant / "variant.toml").write_text('version = 1\nrebased_from = "p1"\n')
    (variant / "0001-change.patch").write_bytes((folder / "0001-change.patch").read_bytes())
    b.profile(["logo"], name="p2")
    b.lock(clean, "p2")
    image = b.tree("image-p2", {})
    before = snapshot(image)
    r = engine.apply(b.request(image, "p2"))
    assert r.ok and r.fix("logo").state == "absent"
    assert (image / "demo_pkg/logo.bin").read_bytes() == b"\x00first\xff"
    assert engine.status(b.request(image, "p2")).fix("logo").state == "applied"
    assert engine.revert(b.request(image, "p2")).ok and snapshot(image) == before


def test_a_missing_binary_source_is_named_at_its_fix_toml_line(sourced):
    b, folder, clean, image = sourced
    (folder / "logo.bin").unlink()
    toml = folder / "fix.toml"
    line = toml.read_text().splitlines().index('"demo_pkg/logo.bin" = "logo.bin"') + 1
    with pytest.raises(PackError) as exc:
        engine.status(b.request(image))
    assert (f"{toml}:{line}: [binary] 'demo_pkg/logo.bin': the fix's source file 'logo.bin' is missing: no "
            f"{folder / 'logo.bin'}") in str(exc.value), str(exc.value)


def _reencode(data: bytes) -> list[str]:
    """Binary data as git writes it under 'literal/delta SIZE': deflated, then base85 lines of <= 52 bytes."""
    import base64
    import zlib

    raw = zlib.compress(data)
    out = []
    for i in range(0, len(raw), 52):
        chunk = raw[i:i + 52]
        lead = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        out.append(lead + base64.b85encode(chunk.ljust((len(chunk) + 3) // 4 * 4, b"\0")).decode())
    return out


def _decode(body: list[str]) -> bytes:
    import base64
    import zlib

    def count(lead: str) -> int:
        return ord(lead) - ord("A") + 1 if lead <= "Z" else ord(lead) - ord("a") + 27

    return zlib.decompress(b"".join(base64.b85decode(ln[1:])[:count(ln[0])] for ln in body))


def test_a_damaged_delta_is_refused_when_the_pack_loads(setup):
    """A delta block that cannot be a delta (here: its header's result size is off by one) was found only when
    apply reached that file; the pack's loading (check, status, apply) now names the block's line, and the
    image is not touched."""
    from fixpack.binpatch import BinaryDataError, delta_sizes, parse_binary

    b, image = setup
    patch = b.pack / "fixes/bins/0001-change.patch"
    lines = patch.read_text().split("\n")
    head = next(i for i, ln in enumerate(lines) if ln.startswith("delta "))
    end = lines.index("", head)
    data = _decode(lines[head + 1:end])
    src, dst = delta_sizes(data)
    assert (src, dst) == (len(BIG), len(BIG))
    tampered = data.replace(data[:6], data[:3] + bytes([data[3] ^ 1]) + data[4:6], 1)  # result size's low byte
    body = _reencode(tampered)
    lines[head:end] = [f"delta {len(tampered)}", *body]
    patch.write_text("\n".join(lines))
    with pytest.raises(BinaryDataError) as err:
        parse_binary(lines, head - 1, next(ln for ln in lines[:head] if ln.startswith("index ") and ".." in ln), 0)
    assert err.value.line == head + 1 and "header says" in err.value.message
    before = snapshot(image)
    with pytest.raises(PackError, match=rf"0001-change.patch:{head + 1}: .*the delta gives"):
        engine.apply(b.request(image))
    assert snapshot(image) == before


LOGO = b"\x00first\xff"


def test_export_writes_a_sourced_binary_file_as_git_binary_data(sourced, tmp_path):
    """Found by a fresh user: export copied the patch that says only "Binary files ... differ" for a new file
    whose bytes come from the fix's folder, and ``git am`` refused it ("missing binary patch data"). The
    export now carries the file's bytes as ``git diff --binary`` writes them; ``git am`` gives apply's bytes."""
    from test_authoring import assert_git_am_equals_apply

    from fixpack.binpatch import blob_id
    from fixpack.exchange import export
    b, _folder, clean, _image = sourced
    out = tmp_path / "series"
    export(b.pack, "p1", (), out)
    text = (out / "0001-logo-change.patch").read_text()
    assert "GIT binary patch\nliteral 7\n" in text and "Binary files " not in text
    assert f"index {'0' * 40}..{blob_id(LOGO)}\n" in text
    assert_git_am_equals_apply(clean, out, lambda root: engine.apply(b.request(root)), tmp_path)


def _bomb_patch(kind: str, declared: int | str, packed: bytes) -> bytes:
    """A patch whose forward block is ``packed`` (zlib data) under '{kind} {declared}', in base85 lines."""
    import base64

    body = []
    for i in range(0, len(packed), 52):
        chunk = packed[i:i + 52]
        lead = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        body.append(lead + base64.b85encode(chunk, pad=True).decode())
    head = f"diff --git a/x.bin b/x.bin\nindex {'1' * 40}..{'2' * 40} 100644\nGIT binary patch\n"
    return (head + f"{kind} {declared}\n" + "\n".join(body) + "\n\nliteral 0\nHcmV?d00001\n\n").encode()


@pytest.mark.parametrize("kind", ["literal", "delta"])
def test_a_zlib_bomb_is_refused_before_it_inflates(kind):
    """64 MiB of zeros deflate to 64 KiB: under 'literal 10' the whole was inflated (64 MiB held; a 200 KB patch
    took 840 MB) before its size was checked against the line's. It is now refused once it passes the size."""
    import tracemalloc
    import zlib

    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    packer = zlib.compressobj(9)
    packed = b"".join(packer.compress(bytes(1 << 20)) for _ in range(64)) + packer.flush()
    data = _bomb_patch(kind, 10, packed)
    tracemalloc.start()
    try:
        with pytest.raises(PatchParseError, match=rf"^bomb.patch:4: the {kind} data inflates to more than the 10 "
                                                  rf"bytes its line says") as exc:
            parse_patch(data, "bomb.patch")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert exc.value.exit_code == 2
    assert peak < 8 << 20, f"peak {peak} bytes while refusing a patch of {len(data)} bytes"


def test_binary_data_after_its_zlib_stream_is_refused():
    """Bytes after the end of a block's zlib stream are no part of the data (git never writes them): damage."""
    import zlib

    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    with pytest.raises(PatchParseError, match=r"^t.patch:4: the literal data has 4 bytes after its zlib stream"):
        parse_patch(_bomb_patch("literal", 3, zlib.compress(b"abc") + b"junk"), "t.patch")
    with pytest.raises(PatchParseError, match=r"^t.patch:4: the literal data does not inflate \(.*cut short"):
        parse_patch(_bomb_patch("literal", 3, zlib.compress(b"abc")[:-2]), "t.patch")


@pytest.mark.parametrize("digits", [19, 5000])
def test_a_block_size_past_any_file_is_bad_input(digits):
    """A 'literal SIZE' of 5000 digits was int()'s ValueError, exit 1 (and 19 digits are past the limit zlib takes
    for the inflating, which now stops at the size): it is bad input, named at its line."""
    import zlib

    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    with pytest.raises(PatchParseError, match=rf"^t.patch:4: the literal size has {digits} digits: no file is that"):
        parse_patch(_bomb_patch("literal", "9" * digits, zlib.compress(b"abc")), "t.patch")


# --- a delta's result: no further than its header says, and no more than MAX_BINARY_BYTES ---------------------

def _delta(src: int, dst: int, ops: bytes) -> bytes:
    """A git delta: the source's and the result's sizes (base-128, least significant first), then ``ops``."""
    def size(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append(n & 0x7F | (0x80 if n >> 7 else 0))
            n >>= 7
            if not n:
                return bytes(out)
    return size(src) + size(dst) + ops


def _peak(call) -> tuple[int, BaseException]:
    """The peak of memory traced while ``call()`` runs (it is expected to raise)."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(Exception) as exc:  # (the caller says which, by exc.value)
            call()
        return tracemalloc.get_traced_memory()[1], exc.value
    finally:
        tracemalloc.stop()


KIB64 = bytes(range(256)) * 256  # a 64 KiB file of the image: what a one-byte copy (0x80) copies whole
COPIES = b"\x80" * 1_000_000  # a million such copies: 64 GiB, in a 1 MB delta (a few KB deflated)


def test_a_delta_whose_copies_pass_its_result_size_is_refused_there():
    """A delta's instructions were listed whole (a tuple each: a 1 MB delta of one-byte copies, ~100 MB) before
    their sum was compared with the result size its header says. Each is now checked in turn, never listed, and
    the result refused once it would pass that size, never built further: applied, and when the pack is read."""
    import zlib

    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    delta = _delta(len(KIB64), 10, COPIES)
    peak, exc = _peak(lambda: apply_delta(KIB64, delta))
    assert isinstance(exc, BinaryApplyError) and "the delta gives more than the 10 bytes its header says" in str(exc)
    assert peak < 8 << 20, f"peak {peak} bytes applying a {len(delta)}-byte delta"
    data = _bomb_patch("delta", len(delta), zlib.compress(delta, 9))
    peak, exc = _peak(lambda: parse_patch(data, "t.patch"))
    assert isinstance(exc, PatchParseError) and exc.exit_code == 2, exc
    assert str(exc).startswith("t.patch:4: the delta gives more than the 10 bytes its header says"), str(exc)
    assert peak < 8 << 20, f"peak {peak} bytes reading a {len(data)}-byte patch"


def test_a_delta_that_says_a_result_past_the_cap_is_refused_at_its_line():
    """The same million copies under a header that says their 64 GiB were read as a delta, and applied to any 64 KiB
    file: 64 GiB built in memory. A result past MAX_BINARY_BYTES (256 MiB) is refused at the delta's line, before an
    instruction is read; so is a literal or a delta block whose line says more."""
    import zlib

    from fixpack.binpatch import MAX_BINARY_BYTES
    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    assert MAX_BINARY_BYTES == 256 << 20
    delta = _delta(len(KIB64), len(COPIES) << 16, COPIES)
    said = f"the delta's header says it gives {len(COPIES) << 16} bytes, more than the 256 MiB a binary block may have"
    with pytest.raises(PatchParseError, match=rf"^t.patch:4: {said}") as exc:
        parse_patch(_bomb_patch("delta", len(delta), zlib.compress(delta, 9)), "t.patch")
    assert exc.value.exit_code == 2
    peak, err = _peak(lambda: apply_delta(KIB64, delta))
    assert isinstance(err, BinaryApplyError) and str(err).startswith(said) and peak < 1 << 20, (peak, err)
    for kind in ("literal", "delta"):
        with pytest.raises(PatchParseError, match=rf"^t.patch:4: the {kind} size {MAX_BINARY_BYTES + 1} is more than "
                                                  rf"the 256 MiB a binary block may have \(MAX_BINARY_BYTES\)"):
            parse_patch(_bomb_patch(kind, MAX_BINARY_BYTES + 1, zlib.compress(b"abc")), "t.patch")


def test_a_delta_for_another_source_size_is_refused_before_its_instructions():
    """A delta whose header's source size is not the file's: its instructions were all read and listed first (here
    a million: ~100 MB) and refused for their sum. The sizes are compared first, nothing else read."""
    delta = _delta(len(KIB64) + 1, 10, COPIES)
    peak, exc = _peak(lambda: apply_delta(KIB64, delta))
    assert isinstance(exc, BinaryApplyError) and str(exc) == f"the delta is for {len(KIB64) + 1} bytes, the file " \
                                                              f"has {len(KIB64)}", exc
    assert peak < 1 << 20, peak


def test_a_copy_past_the_source_s_end_is_refused():
    """A copy of bytes past the source's end (its header's size, the file's) is refused, applied or read; so is a
    header size of more than 64 bits (a long run of such bytes took long to add up)."""
    import zlib

    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    delta = _delta(4, 3, bytes([0x91, 2, 3]))  # copy 3 bytes from offset 2 of a 4-byte file
    with pytest.raises(BinaryApplyError, match="^the delta copies bytes 2-5 of a 4-byte file$"):
        apply_delta(b"abcd", delta)
    with pytest.raises(PatchParseError, match="^t.patch:4: the delta copies bytes 2-5 of a 4-byte file"):
        parse_patch(_bomb_patch("delta", len(delta), zlib.compress(delta)), "t.patch")
    assert apply_delta(b"abcd", _delta(4, 2, bytes([0x91, 2, 2]))) == b"cd"
    with pytest.raises(BinaryApplyError, match="a size of more than 64 bits"):
        apply_delta(b"abcd", b"\xff" * 100_000 + b"\x01\x00")


def _blocks_patch(n: int, size: int, name: str = "x") -> tuple[bytes, list[int]]:
    """A patch of ``n`` new files of ``size`` zero bytes each (git's literal blocks), and each forward block's line."""
    from fixpack.binpatch import new_file_patch

    text = "".join(new_file_patch(f"{name}{i}.bin", bytes(size)) for i in range(n))
    lines = [i for i, ln in enumerate(text.split("\n"), 1) if ln == f"literal {size}"]
    return text.encode(), lines


def test_the_binary_blocks_of_one_patch_are_capped_together(monkeypatch):
    """Found by a fresh user: only each block was capped (1 GiB), and every inflated block is held: one patch of four
    literal blocks of 1 GiB of zeros (5.4 MB) peaked at 5.3 GB, and the 64 MiB a patch file may have holds ~48. A patch's
    blocks together may inflate to MAX_PATCH_BINARY_BYTES (512 MiB): the block that passes it is refused at its line,
    before it is inflated (here with the cap lowered to 4 MiB, so that it is measured in MBs)."""
    from fixpack import binpatch
    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    assert (binpatch.MAX_BINARY_BYTES, binpatch.MAX_PATCH_BINARY_BYTES) == (256 << 20, 512 << 20)
    data, lines = _blocks_patch(4, 1 << 20)
    assert len(parse_patch(data, "t.patch").files) == 4
    monkeypatch.setattr(binpatch, "MAX_PATCH_BINARY_BYTES", 4 << 20)
    assert len(parse_patch(data, "t.patch").files) == 4  # exactly at the cap
    data, lines = _blocks_patch(12, 1 << 20)
    peak, exc = _peak(lambda: parse_patch(data, "t.patch"))
    assert isinstance(exc, PatchParseError) and exc.exit_code == 2, exc
    assert str(exc).startswith(f"t.patch:{lines[4]}: this literal block (1048576 bytes) takes the patch's binary data "
                               f"to 5242880 bytes, more than the 4 MiB the binary blocks of one patch file may have "
                               f"together (MAX_PATCH_BINARY_BYTES)"), str(exc)
    assert peak < 8 << 20, f"peak {peak} bytes refusing a patch of {len(data)} bytes"


def test_a_delta_of_more_instructions_than_any_file_needs_is_refused():
    """Found by a fresh user: each instruction of a delta was read by a Python loop (~3 million a second): a 337 KB
    patch holding a 256 MiB delta of 1-byte inserts made `fixpack check` take 50 s. A delta of more than
    MAX_DELTA_INSTRUCTIONS is refused at its line once it passes them (a file of MAX_BINARY_BYTES rewritten in git's
    127-byte inserts takes 2.1 million); one of that many is read, and applied, as before."""
    import zlib

    from fixpack.binpatch import MAX_DELTA_INSTRUCTIONS
    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    assert MAX_DELTA_INSTRUCTIONS == 1 << 23
    n = MAX_DELTA_INSTRUCTIONS
    delta = _delta(0, n + 1, b"\x01A" * (n + 1))
    with pytest.raises(PatchParseError, match=rf"^t.patch:4: the delta holds more than {n} instructions "
                                              rf"\(MAX_DELTA_INSTRUCTIONS\)") as exc:
        parse_patch(_bomb_patch("delta", len(delta), zlib.compress(delta, 9)), "t.patch")
    assert exc.value.exit_code == 2
    with pytest.raises(BinaryApplyError, match="more than 8388608 instructions"):
        apply_delta(b"", delta)
    delta = _delta(4, n + 2, b"\x01A" * (n - 2) + b"\x02BC" + b"\x91\x01\x02")  # inserts, then a copy of "bc"
    assert apply_delta(b"abcd", delta) == b"A" * (n - 2) + b"BCbc"
    with pytest.raises(BinaryApplyError, match="ends in the middle of an instruction"):
        apply_delta(b"", _delta(0, 4, b"\x01A\x03BC"))  # the last insert runs past the end


def test_the_binary_blocks_of_a_pack_s_patches_are_capped_together(builder, monkeypatch):
    """Each patch file's blocks capped together still let a pack of many patch files hold many times that (each parsed
    patch is held): the patch files one load of a pack parses may inflate to MAX_PACK_BINARY_BYTES (1 GiB) together,
    the block that passes it refused at its line, eagerly (check) and when a run parses its chain (here with the caps
    lowered to MBs). A patch parsed again (a copy of the fix for a profile) counts once."""
    from fixpack import binpatch
    from fixpack.loader import load_pack, load_profile
    from fixpack.patchfiles import parse_fixes
    from fixpack.structs import replace

    assert binpatch.MAX_PACK_BINARY_BYTES == 1 << 30
    monkeypatch.setattr(binpatch, "MAX_PATCH_BINARY_BYTES", 4 << 20)
    monkeypatch.setattr(binpatch, "MAX_PACK_BINARY_BYTES", 5 << 20)
    lines = []
    for fid in ("one", "two"):
        data, _at = _blocks_patch(3, 1 << 20, f"demo_pkg/{fid}")
        folder = builder.add_fix(fid, {}, {}, diff=data.decode())
        text = (folder / "0001-change.patch").read_text()
        lines.append([i for i, ln in enumerate(text.split("\n"), 1) if ln == f"literal {1 << 20}"])
        with (folder / "fix.toml").open("a") as f:
            f.write("[binary]\n" + "".join(f'"demo_pkg/{fid}{i}.bin" = "patch"\n' for i in range(3)))
    builder.profile(["one", "two"])
    said = (f"fixes/two/0001-change.patch:{lines[1][2]}: this literal block (1048576 bytes) takes the binary data of "
            f"the pack's patches to 6291456 bytes, more than the 5 MiB the binary blocks of a pack's patches may have "
            f"together (MAX_PACK_BINARY_BYTES)")
    with pytest.raises(PackError) as exc:
        load_pack(builder.pack)
    assert exc.value.exit_code == 2 and said in str(exc.value).replace(f"{builder.pack}/", ""), str(exc.value)
    pack = load_pack(builder.pack, "p1")  # a run's: parsed when used
    profile = load_profile(pack, "p1", check_paths=False)
    parse_fixes(pack, profile, ["one"])
    first = pack.fixes["one"].patches[0]
    assert replace(first, path=first.path).files == first.files  # a copy of it reads it again: counted once
    with pytest.raises(PackError) as exc:
        parse_fixes(pack, profile, ["two"])
    assert said in str(exc.value).replace(f"{builder.pack}/", ""), str(exc.value)
    monkeypatch.setattr(binpatch, "MAX_PACK_BINARY_BYTES", 6 << 20)  # the two patches' blocks: exactly the cap
    load_pack(builder.pack)


def _deltas_patch(n: int) -> tuple[bytes, list[int]]:
    """A patch of ``n`` binary changes, each a delta both ways (64 KiB of copies in a few bytes: 1 MiB built from a
    64 KiB file forward, 1 MiB from the 1 MiB file back), and each forward delta's line."""
    import base64
    import zlib

    def block(delta: bytes) -> str:
        packed = zlib.compress(delta, 9)
        body = [chr(ord("A") + len(c) - 1) if len(c) <= 26 else chr(ord("a") + len(c) - 27) for c in
                (packed[i:i + 52] for i in range(0, len(packed), 52))]
        body = [lead + base64.b85encode(packed[j * 52:j * 52 + 52], pad=True).decode() for j, lead in enumerate(body)]
        return f"delta {len(delta)}\n" + "\n".join(body) + "\n\n"

    forward = _delta(0x10000, 1 << 20, b"\x90\x00" * 16)  # 16 copies of the whole 64 KiB source (size 0: 0x10000)
    back = _delta(1 << 20, 1 << 20, b"\x90\x00" * 16)
    text = "".join(f"diff --git a/x{i}.bin b/x{i}.bin\nindex {'1' * 40}..{'2' * 40} 100644\nGIT binary patch\n"
                   f"{block(forward)}{block(back)}" for i in range(n))
    lines = text.split("\n")
    heads = [i for i, ln in enumerate(lines, 1) if ln.startswith("delta ") and lines[i - 2] == "GIT binary patch"]
    return text.encode(), heads


def test_the_results_of_a_patch_s_deltas_count_against_the_binary_caps(monkeypatch):
    """Found by review: each delta's result was capped alone (MAX_BINARY_BYTES), not counted with the patch's and the
    pack's binary data: a patch of a few KB holding many deltas built a result of up to 256 MiB for each, all held by
    one apply. A delta's result (its header's size, read before anything is built) counts as a literal block does, the
    delta that passes a cap refused at its line, before an apply; of a file's two directions, only the larger counts
    (one run builds one). Here with the caps lowered to MBs."""
    from fixpack import binpatch
    from fixpack.binpatch import PackBudget
    from fixpack.diff import parse_patch
    from fixpack.errors import PatchParseError

    monkeypatch.setattr(binpatch, "MAX_PATCH_BINARY_BYTES", 4 << 20)
    data, heads = _deltas_patch(3)
    assert len(parse_patch(data, "t.patch").files) == 3  # 3 MiB of results, and a few bytes of data: under it
    data, heads = _deltas_patch(12)
    peak, exc = _peak(lambda: parse_patch(data, "t.patch"))
    assert isinstance(exc, PatchParseError) and exc.exit_code == 2, exc
    assert str(exc).startswith(f"t.patch:{heads[3]}: this delta block's result (1048576 bytes, its header says) "
                               f"takes the patch's binary data to "), str(exc)
    assert "more than the 4 MiB the binary blocks of one patch file may have together (MAX_PATCH_BINARY_BYTES)" \
        in str(exc), str(exc)
    assert peak < 8 << 20, f"peak {peak} bytes refusing a patch of {len(data)} bytes"
    monkeypatch.setattr(binpatch, "MAX_PACK_BINARY_BYTES", 5 << 20)
    pack = PackBudget()
    data, heads = _deltas_patch(3)
    parse_patch(data, "a.patch", pack)
    with pytest.raises(PatchParseError) as err:
        parse_patch(data, "b.patch", pack)
    assert str(err.value).startswith(f"b.patch:{heads[1]}: this delta block's result (1048576 bytes, its header "
                                     f"says) takes the binary data of the pack's patches to "), str(err.value)
    assert "(MAX_PACK_BINARY_BYTES)" in str(err.value)
