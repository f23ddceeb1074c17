"""``import`` reads a mail's own DEP-3 / Yocto fields into fix.toml's ``[upstream]`` (found by a fresh user: a mail
stating ``Upstream-Status: Backport [...]`` and ``Origin: upstream, <commit URL>`` became a fix "submitted" to the
pull request its text named, the commit URL lost), and refuses one fix.toml would not take at its line of the mail
file, nothing written."""

import pytest
import tomllib
from conftest import numbered
from test_authoring import MOD, mail_patch, pack3, pack_bytes  # noqa: F401 (the fixture)

from fixpack.errors import BadInputError
from fixpack.exchange import import_mails
from fixpack.loader import load_pack
from fixpack.patchmail import read_mail

COMMIT = "https://github.com/vllm-project/vllm/commit/0123456789abcdef0123456789abcdef01234567"
PULL = "https://github.com/vllm-project/vllm/pull/12345"


def _mail(builder, body: str) -> str:
    base = numbered(60)
    before = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace(
        "line 50\n", "fifty\n")
    return mail_patch(builder.base, before, before.replace("line 55\n", "fifty-five\n"), body=body)


def _upstream(builder) -> dict:
    return tomllib.loads((builder.pack / "fixes/imp/fix.toml").read_text()).get("upstream", {})


@pytest.mark.parametrize(("trailers", "want"), [
    (f"Upstream-Status: Backport [0.31.0]\nOrigin: upstream, {COMMIT}\n",
     {"status": "backport", "fixed_in": "0.31.0", "link": COMMIT, "origin": f"upstream, {COMMIT}"}),
    (f"Upstream-Status: Backport [{COMMIT}]\nOrigin: backport, {COMMIT}\nBug: https://example.org/b/7\n",
     {"status": "backport", "link": COMMIT, "origin": f"backport, {COMMIT}", "bug": "https://example.org/b/7"}),
    ("Upstream-Status: Inappropriate [Gaudi only]\nOrigin: vendor\n",
     {"status": "inappropriate", "reason": "Gaudi only", "origin": "vendor", "link": PULL}),
    (f"Upstream-Status: Accepted\nApplied-Upstream: v0.32.0, {COMMIT}\nLast-Update: 2024-03-04\n",
     {"status": "accepted", "fixed_in": "v0.32.0", "link": COMMIT, "last_update": "2024-03-04"}),
    ("Upstream-Status: Denied [https://example.org/reply/9]\n",
     {"status": "denied", "link": "https://example.org/reply/9"}),
    ("Forwarded: https://example.org/list/42\n", {"status": "submitted", "link": "https://example.org/list/42"}),
    ("", {"status": "submitted", "link": PULL, "origin": f"upstream, {PULL}", "last_update": "2023-01-02"}),
])
def test_import_takes_the_dep3_fields_a_mail_states(pack3, trailers, want):  # noqa: F811
    builder, clean = pack3
    mail = builder.base / "in.patch"
    mail.write_text(_mail(builder, f"Why it matters.\n\nSigned-off-by: A <a@example.org>\nLink: {PULL}\n{trailers}"))
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    up = _upstream(builder)
    assert {k: up.get(k) for k in want} == want, up
    fix = load_pack(builder.pack).fixes["imp"]
    got = dict(kv for kv in read_mail(fix.patches[0].path.read_text()).trailers)
    if "origin" in want:  # the patch says what the mail said: the fields are the tool's, from fix.toml
        assert got["Origin"] == want["origin"]
    assert [k for k, _v in read_mail(fix.patches[0].path.read_text()).trailers].count("Upstream-Status") == 1


@pytest.mark.parametrize(("trailer", "says"), [
    ("Upstream-Status: Inactive-Upstream [lastcommit: 2019]", "Upstream-Status: Inactive-Upstream [lastcommit: 2019]"
                                                             ": not one of DEP-3's words"),
    ("Upstream-Status: Backport [from the main branch]", "the fix's fixed_in would be 'from the main branch', not a "
                                                        "release version"),
    ("Last-Update: last week", "Last-Update: last week: the fix's last_update would be 'last week', not a date"),
    ("Applied-Upstream: soon", "Applied-Upstream: soon: the fix's fixed_in would be 'soon'"),
])
def test_a_stated_field_fix_toml_would_not_take_is_refused_at_its_line(pack3, trailer, says):  # noqa: F811
    builder, clean = pack3
    mail = builder.base / "in.patch"
    text = _mail(builder, f"Why it matters.\n\nSigned-off-by: A <a@example.org>\n{trailer}\n")
    mail.write_text(text)
    line = text.split("\n").index(trailer) + 1
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert exc.value.exit_code == 2 and pack_bytes(builder.pack) == before
    assert str(exc.value).startswith(f"{mail}:{line}: ") and says in str(exc.value) and "nothing was written" in str(
        exc.value), str(exc.value)


def test_the_first_mail_that_states_a_field_gives_it_and_its_line_is_that_mail_s(pack3, tmp_path):  # noqa: F811
    """A series of two mails: each field from the first mail that states it; a bad one in the second mail is named
    at its line of the file, past the first mail."""
    builder, clean = pack3
    base = numbered(60)
    before = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace(
        "line 50\n", "fifty\n")
    mid = before.replace("line 55\n", "fifty-five\n")
    one = mail_patch(tmp_path, before, mid, body=f"One.\n\nOrigin: upstream, {COMMIT}\n")
    two = mail_patch(tmp_path, mid, mid.replace("line 57\n", "fifty-seven\n"),
                     body="Two.\n\nOrigin: vendor\nUpstream-Status: Backport [0.31.0]\n")
    mail = builder.base / "two.mbox"
    mail.write_text(one + two)
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    up = _upstream(builder)
    assert (up["origin"], up["status"], up["fixed_in"]) == (f"upstream, {COMMIT}", "backport", "0.31.0")

    bad = two.replace("Backport [0.31.0]", "Backport [someday]")
    mail.write_text(one + bad)
    line = (one + bad).split("\n").index("Upstream-Status: Backport [someday]") + 1
    with pytest.raises(BadInputError, match=f"^{mail}:{line}: Upstream-Status: Backport"):
        import_mails(builder.pack, mail, "imp2", "p1", roots={"demo": clean})
