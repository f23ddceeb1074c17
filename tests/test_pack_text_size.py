"""A pack text file (``fixes/series``, a profile, ``fix.toml``) larger than ``MAX_PACK_TEXT_BYTES`` is refused
unread, exit 2 naming it, as the state's manifest and journal are past theirs. Found by a fresh user: a 300 MB
series was read whole (4.9 GB of memory). (The files here are sparse: only their size is big.)"""

from __future__ import annotations

import os

import pytest
from conftest import one_fix_pack, snapshot

from fixpack import documents, engine
from fixpack.errors import FixpackError


@pytest.mark.parametrize("where, kind", [("fixes/series", "series file"), ("profiles/p1.toml", "TOML file"),
                                         ("fixes/one/fix.toml", "TOML file")])
def test_a_pack_text_file_too_large_is_refused_unread(builder, where, kind):
    image = one_fix_pack(builder)
    path = builder.pack / where
    size = 8 << 20  # (the cap is 4 MiB)
    with path.open("r+b") as f:
        f.truncate(size)
    before = snapshot(builder.base / "image")
    for call in (engine.status, engine.apply):
        with pytest.raises(FixpackError) as exc:
            call(builder.request(image))
        assert exc.value.exit_code == 2, str(exc.value)
        assert f"{where}: {size} bytes, more than the 4 MiB a pack's {kind} may have" in str(exc.value), str(exc.value)
    assert snapshot(builder.base / "image") == before


def test_a_pack_text_file_at_the_cap_is_read(builder):
    image = one_fix_pack(builder)
    path = builder.pack / "fixes/series"
    assert documents.MAX_PACK_TEXT_BYTES == 4 << 20
    with path.open("a") as f:
        f.write("#" * (documents.MAX_PACK_TEXT_BYTES - os.path.getsize(path) - 1) + "\n")
    assert os.path.getsize(path) == documents.MAX_PACK_TEXT_BYTES
    assert engine.status(builder.request(image)).ok, "read as before"
