"""The pack in this repository: it loads, every patch is in its deterministic form, every fix has
its proof test, and formatting is idempotent."""

from conftest import REPO

from fixpack.loader import load_pack, load_profile
from fixpack.pack_tools import stale_patches
from fixpack.patchtext import normalize_text, normalized


def test_pack_loads_and_profiles_validate():
    pack = load_pack(REPO)
    for name in pack.profiles:
        load_profile(pack, name)
    assert "v0.30.0" in pack.profiles


def test_patches_are_deterministic():
    pack = load_pack(REPO)
    assert stale_patches(pack) == [], "run `fixpack format` and commit"
    for fix in pack.fixes.values():
        for p in fix.patches:
            text = normalized(fix, p)
            assert "\nindex " not in text and "\nDate:" not in text
            assert normalize_text(fix, text) == text


def test_every_fix_has_a_proof_and_a_why():
    pack = load_pack(REPO)
    for fix in pack.fixes.values():
        assert list(fix.folder.glob("test_*.py")), f"{fix.id} has no proof test"
        assert len(fix.why) > 40, f"{fix.id}: say the symptom in `why`"
