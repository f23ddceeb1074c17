"""``import`` reads a mail's own DEP-3 / Yocto fields into fix.toml's ``[upstream]`` (found by a fresh user: a mail
stating ``Upstream-Status: Backport [...]`` and ``Origin: upstream, <commit URL>`` became a fix "submitted" to the
pull request its text named, the commit URL lost), and refuses one fix.toml would not take at its line of the mail
file, nothing written."""

import re

import pytest
import tomllib
from conftest import git, numbered
from test_authoring import MOD, mail_patch, pack3, pack_bytes  # noqa: F401 (the fixture)

from fixpack.diff import diff_body
from fixpack.errors import BadInputError, PatchParseError
from fixpack.exchange import import_mails
from fixpack.loader import load_pack
from fixpack.patchmail import read_mail

COMMIT = "https://github.com/vllm-project/vllm/commit/0123456789abcdef0123456789abcdef01234567"
PULL = "https://github.com/vllm-project/vllm/pull/12345"


# the module as pack3's chain leaves it (fixes a, b, c), and as the first mail of a series leaves it
TOP = numbered(60).replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace(
    "line 50\n", "fifty\n")
MID = TOP.replace("line 55\n", "fifty-five\n")


def _mail(builder, body: str) -> str:
    return mail_patch(builder.base, TOP, MID, body=body)


def _series(tmp_path, one: str, two: str) -> tuple[str, str]:
    """Two mails of one series on pack3's chain, their messages ``one`` and ``two``."""
    return (mail_patch(tmp_path, TOP, MID, body=one),
            mail_patch(tmp_path, MID, MID.replace("line 57\n", "fifty-seven\n"), body=two))


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
    ("", {"status": "submitted", "link": PULL, "origin": None, "last_update": "2023-01-02"}),  # (not upstream's yet)
    (f"Origin: upstream, {COMMIT}\nForwarded: not-needed\n", {"status": "backport", "link": COMMIT}),  # (DEP-3)
    (f"Origin: upstream, {COMMIT}\n", {"status": "backport", "link": COMMIT, "origin": f"upstream, {COMMIT}"}),
    # (git cherry-pick -x's line: the commit, in DEP-3's form for a bare id; whose repository is not said)
    ("(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\n",
     {"status": "submitted", "link": PULL, "origin": "commit:0123456789abcdef0123456789abcdef01234567"}),
    ("Depends-on: https://github.com/vllm-project/vllm/pull/100\nReverts: https://github.com/x/y/commit/abcdef12\n",
     {"status": "submitted", "link": PULL, "origin": None}),  # (other trailers' links are not the fix's)
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
    if want.get("origin"):  # the patch says what the mail said: the fields are the tool's, from fix.toml
        assert got["Origin"] == want["origin"]
    assert [k for k, _v in read_mail(fix.patches[0].path.read_text()).trailers].count("Upstream-Status") == 1


@pytest.mark.parametrize(("trailer", "says"), [
    ("Upstream-Status: Inactive-Upstream [lastcommit: 2019]", "Upstream-Status: Inactive-Upstream [lastcommit: 2019]"
                                                             ": not one of DEP-3's words"),
    ("Upstream-Status: Backport [from the main branch]", "the fix's fixed_in would be 'from the main branch', not a "
                                                        "release version"),
    ("Last-Update: last week", "Last-Update: last week: not a date"),
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


def test_the_mails_of_a_fix_agree_on_a_field_or_are_refused_at_the_line_of_the_one_that_differs(pack3, tmp_path):  # noqa: F811
    """A series of two mails: a fix has one [upstream], written into each patch, so a field two mails state
    otherwise is refused at the later one's line of the file (a fresh user: the first mail's value was taken and a
    later mail's invalid value went through); Last-Update is the latest date."""
    builder, clean = pack3
    one, two = _series(tmp_path, f"One.\n\nOrigin: upstream, {COMMIT}\nLast-Update: 2024-05-01\n"
                                 "upstream-status: backport  [0.31.0]\n",  # (agrees: case, spacing)
                       f"Two.\n\nOrigin: upstream, {COMMIT}\nUpstream-Status: Backport [0.31.0]\nLast-Update: 2024-06-02\n")
    mail = builder.base / "two.mbox"
    before_pack = pack_bytes(builder.pack)
    for bad, says in (("Origin: vendor", f"Origin: vendor: but {mail}:"), ("Upstream-Status: Foo", "not one of DEP-3's"),
                      ("Last-Update: soon", "Last-Update: soon: not a date")):
        key = bad.split(":")[0]
        changed = re.sub(rf"\n{key}: [^\n]*\n", f"\n{bad}\n", two, count=1)
        changed = changed if bad in changed else changed.replace("\nLast-Update", f"\n{bad}\nLast-Update", 1)
        mail.write_text(one + changed)
        line = (one + changed).split("\n").index(bad) + 1
        with pytest.raises(BadInputError, match=f"^{re.escape(str(mail))}:{line}: ") as exc:
            import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
        assert says in str(exc.value) and pack_bytes(builder.pack) == before_pack, str(exc.value)
    mail.write_text(one + two)
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    up = _upstream(builder)
    assert (up["origin"], up["status"], up["fixed_in"], up["last_update"]) == (f"upstream, {COMMIT}", "backport",
                                                                               "0.31.0", "2024-06-02")


@pytest.mark.parametrize(("trailers", "lost"), [
    ("Upstream-Status: Pending\nForwarded: https://example.org/pull/77", "Forwarded: https://example.org/pull/77"),
    ("Upstream-Status: Pending\nForwarded: not-needed", "Forwarded: not-needed"),
    ("Upstream-Status: Inappropriate [native]\nForwarded: https://example.org/p/3", "Forwarded: https://example.org"),
    ("Upstream-Status: Backport [0.31.0]\nApplied-Upstream: 0.32.0", "Upstream-Status: Backport [0.31.0]"),
    ("Upstream-Status: Submitted [https://example.org/p/1]\nForwarded: https://example.org/p/2", "Forwarded: https:"),
    ("Upstream-Status: Submitted [vllm-dev mailing list]", "Upstream-Status: Submitted [vllm-dev mailing list]"),
    ("Upstream-Status: Pending [will submit]", "Upstream-Status: Pending [will submit]"),
    # (a backport's patches say Forwarded: not-needed: the pull request's link was carried by Upstream-Status alone)
    (f"Origin: upstream, {COMMIT}\nForwarded: {PULL}", f"Forwarded: {PULL}: the patches would say Forwarded: "
                                                       f"not-needed"),
    ("Forwarded: no, waiting for review", "Forwarded: no, waiting for review: the patches would not carry 'waiting "
                                          "for review'"),
    ("Upstream-Status: Inappropriate [native]\nForwarded: not-needed (Gaudi only)", "would not carry 'Gaudi only'"),
    ("Upstream-Status: Pending\nUpstream-Status: Accepted", "Upstream-Status: Accepted: but"),
])
def test_a_stated_field_the_patches_would_not_carry_is_refused_not_dropped(pack3, trailers, lost):  # noqa: F811
    """Found by a fresh user: fields a mail stated were changed or dropped without a word (Pending with a Forwarded
    link written 'Forwarded: no', a Backport release overridden by Applied-Upstream, a bracket note dropped, a second
    Upstream-Status ignored). Each is refused at its line, exit 2, nothing written."""
    builder, clean = pack3
    mail = builder.base / "in.patch"
    text = _mail(builder, f"Why it matters.\n\nSigned-off-by: A <a@example.org>\n{trailers}\n")
    mail.write_text(text)
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    said = str(exc.value)
    at = re.match(rf"{re.escape(str(mail))}:(\d+): ", said)
    assert at and lost in said and "nothing was written" in said, said
    named = text.split("\n")[int(at.group(1)) - 1]  # (the line named is the field's, as the message quotes it)
    assert named in trailers.split("\n") and said[at.end():].startswith(named + ":"), (named, said)
    assert exc.value.exit_code == 2 and pack_bytes(builder.pack) == before


@pytest.mark.parametrize(("description", "want"), [
    ("See [https://github.com/vllm-project/vllm/pull/12](https://github.com/vllm-project/vllm/pull/12).",
     {"status": "pending", "link": ""}),  # (prose: another change's link, as often as the fix's own)
    ("Why.\n\nLink: [https://github.com/vllm-project/vllm/pull/12](https://github.com/vllm-project/vllm/pull/12)",
     {"status": "submitted", "link": "https://github.com/vllm-project/vllm/pull/12"}),
    ("See https://github.com/vllm'project/vllm/pull/12 for the review.", {"status": "pending", "link": ""}),
    ("Why.\n\nLink: https://github.com/vllm-project/vllm/pull/3.\nFixes: https://github.com/vllm-project/vllm/issues/77.",
     {"status": "submitted", "link": "https://github.com/vllm-project/vllm/pull/3",
      "bug": "https://github.com/vllm-project/vllm/issues/77"}),
    (f"The crash came with {COMMIT}; transformers did the same in https://github.com/h/t/pull/31337.\n\n"
     f"Upstream-Status: Submitted [{PULL}]", {"status": "submitted", "link": PULL, "origin": None}),
    (f"Why.\n\nFixes: {COMMIT}\nCloses: https://github.com/vllm-project/vllm/issues/9,",
     {"status": "pending", "bug": "https://github.com/vllm-project/vllm/issues/9", "origin": None}),
    ("Why.\n\nForwarded: yes", {"status": "submitted", "link": ""}),
    ("Why.\n\nForwarded: not-needed", {"status": "inappropriate"}),
    ("Why.\n\nForwarded: not-needed (Gaudi only)", {"status": "inappropriate", "reason": "Gaudi only"}),
    ("Why.\n\nForwarded: Not-Needed, vendor tweak", {"status": "inappropriate", "reason": "vendor tweak"}),
    ("Why.\n\nUpstream-Status: Inappropriate [Gaudi only]\nForwarded: not-needed (Gaudi only)",
     {"status": "inappropriate", "reason": "Gaudi only"}),
    (f"Why.\n\nForwarded: <{PULL}>", {"status": "submitted", "link": PULL}),
    ("Fix the detokenizer.\n\nhttps://github.com/vllm-project/vllm/pull/5",
     {"status": "submitted", "link": "https://github.com/vllm-project/vllm/pull/5"}),
    ("Taken.\n\nApplied-Upstream: 0.31.0, " + COMMIT, {"status": "accepted", "fixed_in": "0.31.0", "link": COMMIT}),
    ("Taken.\n\nApplied-Upstream: " + COMMIT, {"status": "accepted", "link": COMMIT, "fixed_in": ""}),
])
def test_links_in_a_mail_s_text_are_read_as_links(pack3, description, want):  # noqa: F811
    """Found by fresh users: a Markdown link became 'pull/12](https://...' in every field, an apostrophe in a link
    made fix.toml invalid (named at a file never written), a pull request's link as the last paragraph (git reads it
    as a trailer) was lost, an Applied-Upstream alone left the fix pending, its link dropped; links in the prose (the
    commit that brought the bug, another project's pull request) made the fix submitted there, with that Origin; a
    kernel-style Fixes: (the culprit commit) became the Origin; a sentence's last dot stayed in a link; Forwarded: yes
    and not-needed (DEP-3's words) and <link> were refused. Links come from the trailers now, cut as links."""
    builder, clean = pack3
    mail = builder.base / "in.patch"
    mail.write_text(_mail(builder, description + "\n"))
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    up = _upstream(builder)
    assert {k: up.get(k) for k in want} == want, up


def test_a_field_of_an_encoded_mail_is_named_at_its_mail_not_a_wrong_line(pack3):  # noqa: F811
    """Found by a fresh user: in a quoted-printable mail the line named was counted in the decoded text."""
    builder, clean = pack3
    mail = builder.base / "in.patch"
    text = _mail(builder, "Why: " + "x" * 90 + " =C3=A4.\n\nLast-Update: 2024-13-45\n")
    head, sep, body = text.partition("\n\n")
    assert "Content-Transfer-Encoding" not in head  # (all ASCII: git writes none)
    qp = head + "\nMIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: " \
        "quoted-printable" + sep + body.replace("x" * 90, "x" * 70 + "=\n" + "x" * 20, 1)
    mail.write_text(qp)
    with pytest.raises(BadInputError, match=f"^{re.escape(str(mail))} \\(mail at line 1\\): Last-Update: 2024-13-45"):
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})


@pytest.mark.parametrize("message", [
    f"Why.\n\nUpstream-Status: Backport [{COMMIT}]\n\nSigned-off-by: A <a@example.org>\n",  # Yocto above the sign-off
    f"Origin: upstream, {COMMIT}\nLast-Update: 2025-02-28\n\nWhy it matters.\n\nSigned-off-by: A <a@example.org>\n",
])
def test_a_field_the_tool_owns_above_the_trailer_block_is_refused_at_its_line(pack3, message):  # noqa: F811
    """Found by a fresh maintainer: a Yocto Upstream-Status above the sign-off, or a DEP-3 header as the first
    paragraph, was kept in the description and the patch carried the tool's own field too (Backport and Pending,
    two Last-Updates). Refused at its line, exit 2, nothing written."""
    builder, clean = pack3
    mail = builder.base / "in.patch"
    text = _mail(builder, message)
    mail.write_text(text)
    first = next(ln for ln in message.split("\n") if ln.startswith(("Upstream-Status", "Origin")))
    line = text.split("\n").index(first) + 1
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError, match=f"^{re.escape(str(mail))}:{line}: {re.escape(first)}: a field the tool "
                                            f"writes from fix.toml, above the mail's trailer block"):
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert pack_bytes(builder.pack) == before


def test_a_mail_stating_a_field_twice_otherwise_is_told_to_state_it_once(pack3):  # noqa: F811
    builder, clean = pack3
    mail = builder.base / "in.patch"
    mail.write_text(_mail(builder, f"Why.\n\nUpstream-Status: Pending\nUpstream-Status: Submitted [{PULL}]\n"))
    with pytest.raises(BadInputError, match="written into each of its patches: a mail states it once; nothing"):
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    # (a fresh user: two Last-Update dates in one mail were taken as the latest without a word; several mails' dates
    # give the latest, as the test below shows, one mail states its own once)
    text = _mail(builder, "Why.\n\nLast-Update: 2024-01-01\nLast-Update: 2024-02-02\n")
    mail.write_text(text)
    line = text.split("\n").index("Last-Update: 2024-02-02") + 1
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value).startswith(f"{mail}:{line}: Last-Update: 2024-02-02: but {mail}:{line - 1} says "
                                     f"Last-Update: 2024-01-01: a mail states it once"), exc.value


def test_last_update_is_the_latest_mail_date_of_a_series_reordered(pack3, tmp_path):  # noqa: F811
    """Found by a fresh maintainer: a series whose later mail is older (rebase -i) took the last mail's date."""
    builder, clean = pack3
    one, two = _series(tmp_path, "One.\n", "Two.\n")
    two = two.replace("Date: Mon, 2 Jan 2023", "Date: Sun, 1 Jan 2023")
    assert "Date: Sun, 1 Jan 2023" in two
    mail = builder.base / "two.mbox"
    mail.write_text(one + two)
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert _upstream(builder)["last_update"] == "2023-01-02"


def _b4(mail: str, blank: bool = True) -> str:
    """``mail`` (git format-patch --base's) as b4 sends a patch without a cover letter: a blank line (``blank``) and
    '---' above the base-commit line, a change-id under it, a greeting, and the sender as the signature."""
    head, _sp, base = mail.partition("\nbase-commit: ")
    commit = base.split("\n", 1)[0]
    return f"{head if blank else head.rstrip(chr(10)) + chr(10)}---\nbase-commit: {commit}\nchange-id: " \
           f"20230102-topic-0123456789ab\n\nBest regards,\n-- \nA <a@x>\n"


@pytest.mark.parametrize("shape", ["git format-patch --base", "b4", "b4 without the blank line"])
def test_a_mail_made_with_its_base_commit_is_imported_as_without(pack3, tmp_path, shape):  # noqa: F811
    """found by a fresh user: a mail of git format-patch --base (or b4) ends its diff with the commit it was made on
    ('base-commit: <id>', and the patches it needs, above the signature); import refused it at the blank line above
    ('unexpected line outside a hunk'), though git am takes it. The fix is the one the mail without it gives; the
    block is no part of the patch. A hunk line lost after it, or one more than the counts say, is still refused."""
    builder, clean = pack3
    body = f"Why it matters.\n\nSigned-off-by: A <a@example.org>\nLink: {PULL}\n"
    plain = mail_patch(tmp_path, TOP, MID, body=body)
    based = mail_patch(tmp_path, TOP, MID, body=body, options=("--base=HEAD~1",))
    assert "\nbase-commit: " in based and "\n\nbase-commit: " in based
    if shape.startswith("b4"):  # (a fresh user: b4's mails have the blank line above '---'; it was refused)
        based = _b4(based, blank=shape == "b4")
    mail = builder.base / "in.patch"
    mail.write_text(based)
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    got = load_pack(builder.pack).fixes["imp"].patches[0].path.read_text()
    assert "base-commit" not in got and "change-id" not in got and "Best regards" not in got
    assert got.partition("\n---\n")[2] == diff_body(plain)
    bad = based.replace("\n@@ -53,7 +53,7 @@", "\n@@ -53,6 +53,6 @@")  # the hunk's last context line over its counts
    assert bad != based
    mail.write_text(bad)
    with pytest.raises(PatchParseError) as exc:
        import_mails(builder.pack, mail, "imp2", "p1", roots={"demo": clean})
    assert "has more lines than its header '@@ -53,6 +53,6 @@ line 51' states (6 pre-image and 6 post-image lines): 1 more " \
           "line follows it" in str(exc.value), exc.value
    if shape != "git format-patch --base":
        return  # (b4's '---' line: such a hunk reads it as a removed line and is refused at the base-commit line)
    long = based.replace("\n@@ -53,7 +53,7 @@", "\n@@ -53,8 +53,8 @@")  # the blank line above the block taken as
    mail.write_text(long)  # the hunk's last context line (found by a fresh user: it was, and the patch accepted)
    blank = long.split("\n").index("base-commit: " + long.split("\nbase-commit: ")[1].split("\n")[0])
    with pytest.raises(PatchParseError) as exc:
        import_mails(builder.pack, mail, "imp2", "p1", roots={"demo": clean})
    assert f":{blank}: the hunk that starts at line " in str(exc.value) and "right above the base-commit block: its " \
        "@@ counts claim one line more than it has" in str(exc.value), exc.value


@pytest.mark.parametrize("shape", ["git format-patch --base", "b4"])
def test_a_file_section_below_the_base_commit_block_is_refused_at_its_line(pack3, tmp_path, shape):  # noqa: F811
    """found by a fresh user: a diff after the base-commit block (a second patch pasted in, git am applies it) was
    dropped without a word, the fix written with the first section alone. It is refused at its 'diff --git' line."""
    builder, clean = pack3
    based = mail_patch(tmp_path, TOP, MID, body="Why.\n\nSigned-off-by: A <a@example.org>\n", options=("--base=HEAD~1",))
    based = _b4(based) if shape == "b4" else based
    extra = "diff --git a/demo_pkg/other.py b/demo_pkg/other.py\nnew file mode 100644\n--- /dev/null\n" \
            "+++ b/demo_pkg/other.py\n@@ -0,0 +1 @@\n+x\n"
    head, sig, tail = based.rpartition("\n-- \n")
    mail = builder.base / "in.patch"
    mail.write_text(f"{head}\n{extra}{sig.lstrip(chr(10))}{tail}")
    line = mail.read_text().split("\n").index("diff --git a/demo_pkg/other.py b/demo_pkg/other.py") + 1
    before = pack_bytes(builder.pack)
    with pytest.raises(PatchParseError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert f":{line}: a file section below the base-commit block at line " in str(exc.value), exc.value
    assert pack_bytes(builder.pack) == before


def _quilt(tmp_path, header: str) -> str:
    """A Debian quilt patch of pack3's next change: a DEP-3 ``header``, then quilt's diff (Index: line, X.orig)."""
    (tmp_path / "x").write_text(TOP)
    (tmp_path / "y").write_text(MID)
    import subprocess

    hunks = subprocess.run(["diff", "-u", "x", "y"], cwd=tmp_path, capture_output=True, text=True).stdout
    hunks = hunks.split("\n", 2)[2]
    return (f"{header}\nIndex: demo-1.0/{MOD}\n{'=' * 67}\n--- demo-1.0.orig/{MOD}\n+++ demo-1.0/{MOD}\n"
            f"{hunks}")


def _imported_quilt(pack3, tmp_path, header: str):  # noqa: F811
    """The fix ``imp`` imported from a quilt patch with DEP-3 ``header`` on pack3's chain, and its patch's text."""
    builder, clean = pack3
    mail = tmp_path / "x.patch"
    mail.write_text(_quilt(tmp_path, header))
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    fix = load_pack(builder.pack).fixes["imp"]
    return fix, fix.patches[0].path.read_text()


DEP3 = ("Description: Say fifty-five\n The module said line 55 where it means\n fifty-five.\n .\n A second paragraph"
        ".\nAuthor: Ana Pérez <ana@example.org>\nAuthor: Bo <bo@example.org>\n"
        f"Origin: upstream, {COMMIT}\nBug: https://github.com/vllm-project/vllm/issues/7\n"
        "Bug-Debian: https://bugs.debian.org/123456\nReviewed-by: Cy <cy@example.org>\nLast-Update: 2026-11-30\n"
        "\nFree text below the header.\n")


def test_a_debian_quilt_patch_with_a_dep3_header_is_imported_as_its_mail(pack3, tmp_path):  # noqa: F811
    """A fresh user: a Debian quilt patch (debian/patches/X.patch), whose DEP-3 header is the patch's only message, was
    refused ('the mail has no From: header'). Its header is read as DEP-3 says: Description's first line the subject,
    its other lines (one space less, ' .' an empty line) and the free text below the description; the first Author
    the author, another a Co-authored-by trailer; Origin, Bug and Last-Update into fix.toml's [upstream]; other fields
    (Bug-Debian, Reviewed-by) kept as trailers. The pack's patch is git's form of it, which git am applies."""
    builder, clean = pack3
    mail = tmp_path / "fifty-five.patch"
    mail.write_text(_quilt(tmp_path, DEP3))
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    fix = load_pack(builder.pack).fixes["imp"]
    text = fix.patches[0].path.read_text()
    got = read_mail(text)
    assert got.author == "Ana Pérez <ana@example.org>" and got.subject == "Say fifty-five" and not got.dep3
    assert got.description == ("The module said line 55 where it means\nfifty-five.\n\nA second paragraph.\n\n"
                               "Free text below the header.")
    kept = [(k, v) for k, v in got.trailers if k in ("Co-authored-by", "Bug-Debian", "Reviewed-by")]
    assert kept == [("Co-authored-by", "Bo <bo@example.org>"), ("Bug-Debian", "https://bugs.debian.org/123456"),
                    ("Reviewed-by", "Cy <cy@example.org>")]
    up = _upstream(builder)
    assert {k: up.get(k) for k in ("status", "link", "origin", "bug", "last_update")} == {
        "status": "backport", "link": COMMIT, "origin": f"upstream, {COMMIT}",
        "bug": "https://github.com/vllm-project/vllm/issues/7", "last_update": "2026-11-30"}, up
    repo = tmp_path / "repo"
    (repo / "demo_pkg").mkdir(parents=True)
    (repo / MOD).write_text(TOP)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-qm", "release")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "am", "-q", str(fix.patches[0].path))
    assert (repo / MOD).read_text() == MID
    assert git(repo, "log", "-1", "--format=%an <%ae>%n%s") == "Ana Pérez <ana@example.org>\nSay fifty-five\n"


@pytest.mark.parametrize(("field", "says"), [
    ("Last-Update: 2026-13-45", "Last-Update: 2026-13-45: not a date"),
    ("Forwarded: no", None),  # (beside Origin: upstream: stated, not lost; taken)
])
def test_a_dep3_header_field_is_refused_at_its_line_of_the_patch(pack3, tmp_path, field, says):  # noqa: F811
    """A DEP-3 field fix.toml would not take is refused at its line in the header, as a mail's trailer is, nothing
    written; one it takes is imported."""
    builder, clean = pack3
    header = f"Description: Say fifty-five\nAuthor: Ana <ana@example.org>\n{field}\n"
    mail = tmp_path / "x.patch"
    mail.write_text(_quilt(tmp_path, header))
    before = pack_bytes(builder.pack)
    if says is None:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
        return
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value).startswith(f"{mail}:3: {says}") and "nothing was written" in str(exc.value), exc.value
    assert pack_bytes(builder.pack) == before


def test_a_dep3_header_without_an_author_is_told_to_name_one(pack3, tmp_path):  # noqa: F811
    """DEP-3 lets a backport leave its Author out (Origin names the commit); a fix's patch has an author: the refusal
    names DEP-3's field, not a mail's From: header."""
    builder, clean = pack3
    mail = tmp_path / "x.patch"
    mail.write_text(_quilt(tmp_path, f"Description: Say fifty-five\nOrigin: upstream, {COMMIT}\n"))
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value) == f"{mail}:1: the DEP-3 header has no Author: (the patch's author); write one", exc.value
    assert pack_bytes(builder.pack) == before


def test_a_mail_s_transport_headers_are_no_fields_of_a_dep3_patch():
    """A DEP-3 header with a mail's transport headers (To:, Message-Id:) beside its fields: they are dropped as git am
    drops them, DEP-3's fields are read; its Subject: (Description's other name) decoded, without a [PATCH] tag."""
    text = (f"Author: Ana <ana@example.org>\nTo: list@example.org\nMessage-Id: <1@example.org>\n"
            f"Subject: [PATCH v2] =?UTF-8?q?Say_f=C3=BCnf?=\nOrigin: upstream, {COMMIT}\n\nlong text\n\n"
            f"--- a/{MOD}\n+++ b/{MOD}\n@@ -1 +1 @@\n-a\n+b\n")
    got = read_mail(text)
    assert got.dep3 and got.author == "Ana <ana@example.org>" and got.date == ""
    assert got.subject == "Say fünf" and got.description == "long text" and got.trailers == (
        ("Origin", f"upstream, {COMMIT}"),)



_D = "\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.mark.parametrize(("header", "line", "says"), [
    ("Description: First\nDescription: Second\nAuthor: J <j@x.org>\n", 2, "a second Description: "),
    ("Subject: the subject\nDescription: the description\nAuthor: J <j@x.org>\n", 2, "a second Description: "),
    ("Description: Text\nAuthor: J <j@x.org>\nthis line is stray\nForwarded: no\n", 3,
     "'this line is stray' is neither a field (Key: value) nor a line of the one above"),
    ("Description: X\nOrigin: vendor\nForwarded: no\nAuthor: Jane Doe (no address)\n", 4,
     "its Author: header 'Jane Doe (no address)' is not Name <address>"),
    ("Description: X\nAuthor: Jane Doe <jane@example.org>, Bob Two <bob@example.org>\n", 2,
     "names more than one author"),
    ("Description:\n The text starts here.\n More.\nAuthor: J <j@x.org>\n", 1, "its Description: line is empty"),
    ("Description: Dash\n First line.\n ---\n After.\nAuthor: J <j@x.org>\n", 3,
     "a description line '---', where git am ends a patch's message"),
    ("Author: J <j@x.org>\nOrigin: vendor\n", 1, "the DEP-3 header has no Description:"),
])
def test_a_dep3_header_that_cannot_be_read_whole_is_refused_at_its_line(header, line, says):
    """A fresh user: a DEP-3 header read in part imported with exit 0 (a second Description, a Subject beside a
    Description, a stray line: dropped; two authors on one Author: line: the first one's address lost), or was refused
    at line 1 (an Author that is not Name <address>) or with a message about fix.toml (an empty Description line) or
    git's trailers (a description line '---'). Each is refused at its own line of the file."""
    with pytest.raises(BadInputError) as exc:
        read_mail(header + _D, "p.patch:1")
    assert str(exc.value).startswith(f"p.patch:{line}: ") and says in str(exc.value), exc.value


def test_a_folded_dep3_field_is_named_at_its_line(pack3, tmp_path):  # noqa: F811
    """A field folded over two lines whose value fix.toml would not take was named at its mail ('FILE (mail at line
    1)'): it is named at the field's first line."""
    builder, clean = pack3
    mail = tmp_path / "x.patch"
    mail.write_text(_quilt(tmp_path, "Description: Folded\nAuthor: A <a@example.org>\nUpstream-Status: Backport\n"
                                     " [not a release]\n"))
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value).startswith(f"{mail}:3: Upstream-Status: Backport [not a release]: "), exc.value


def test_a_format_patch_mail_with_a_dep3_header_added_is_still_a_mail(pack3, tmp_path):  # noqa: F811
    """A fresh user: git format-patch --add-header='Bug-Debian: ...' (a DEP-3 field in a mail's header) was read as a
    DEP-3 header: the subject kept its '[PATCH]' tag and was not decoded. It is a mail (its From line, its Date:):
    read as one, the DEP-3 fields of its header taken as trailers (git am would drop them: the fix's [upstream] is
    made of them, as a trailer's). A mail whose header lines end in CR LF ends its header at its CR LF line."""
    builder, clean = pack3
    text = mail_patch(tmp_path, TOP, MID, subject="Fix the métrics", options=(
        "--add-header=Bug-Debian: https://bugs.debian.org/1", f"--add-header=Origin: upstream, {COMMIT}"))
    got = read_mail(text)
    assert got.subject == "Fix the métrics" and not got.description.startswith("=?"), got
    assert got.trailers[:2] == (("Bug-Debian", "https://bugs.debian.org/1"), ("Origin", f"upstream, {COMMIT}")), got
    mail = tmp_path / "in.patch"
    mail.write_text(text)
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    fix = load_pack(builder.pack).fixes["imp"]
    assert fix.summary == "Fix the métrics" and read_mail(fix.patches[0].path.read_text()).subject == fix.summary
    assert _upstream(builder)["origin"] == f"upstream, {COMMIT}"
    assert "Bug-Debian: https://bugs.debian.org/1" in fix.patches[0].path.read_text()
    crlf = ("From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\r\nFrom: Jane <j@x.org>\r\n"
            "Date: Mon, 7 Dec 2026 02:25:23 +0000\r\nSubject: [PATCH] A mail\r\n\r\nText.\r\n\r\n"
            "Last-Update: 2024-01-01\r\n---\r\n" + _D)
    got = read_mail(crlf)
    assert (got.subject, got.description, got.trailers) == ("A mail", "Text.", (("Last-Update", "2024-01-01"),))


def test_a_patch_with_no_header_at_all_is_told_which_headers_are_read(pack3, tmp_path):  # noqa: F811
    """Free text first, then a DEP-3 header below it (or no header): the refusal said 'the mail has no From: header',
    which names no DEP-3; it names both forms the patch's top may take."""
    builder, clean = pack3
    mail = tmp_path / "x.patch"
    mail.write_text(_quilt(tmp_path, "This is free text.\n\nDescription: x\nAuthor: A <a@example.org>\n"))
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value) == (f"{mail}:1: the patch starts with neither a mail's header (From:, Subject:) nor a DEP-3 "
                              f"header (Description:, Author:) on its first line: write one there")


@pytest.mark.parametrize(("header", "line", "says"), [
    # (a second fresh user: the encoded line break wrote header lines of its own into the patch, Fix-Id one of them)
    ("Description: =?UTF-8?q?Fix_reader=0AFix-Id:_other?=\nAuthor: J <j@x.org>\n", 1,
     "its Description: holds U+000A (from an encoded word), a line break, which would write a header line of its own"),
    ("Description: =?UTF-8?q?Fix_reader=00?=\nAuthor: J <j@x.org>\n", 1,
     "its Description: holds U+0000 (from an encoded word), a control character, which a terminal acts on"),
    ("Author: J <j@x.org>\nDescription: Fix \x1b[2Jreader\n", 2, "its Description: holds U+001B, a control character"),
    ("Author: J <j@x.org>\nSubject: Fix \u202ereader\n", 2, "its Subject: holds U+202E, a bidirectional control, "
                                                             "which shows the text in another order than it is read"),
    ("Description: x\nAuthor: J <j@x.org>\nDate: 2024-01-01\n", 3, "Date: 2024-01-01: not a mail's date, which git am "
                                                                     "reads"),
    ("Description: [PATCH v2]\nAuthor: J <j@x.org>\n", 1, "its Description: line is empty but for a [PATCH] tag"),
])
def test_a_dep3_header_git_could_not_read_back_is_refused_at_its_line(header, line, says):
    with pytest.raises(BadInputError) as exc:
        read_mail(header + _D, "p.patch:1")
    assert str(exc.value).startswith(f"p.patch:{line}: ") and says in str(exc.value), exc.value


@pytest.mark.parametrize(("header", "want"), [
    # dh_make's old template: the fields, then '---' and a note git am drops
    ("Description: Fix it\nAuthor: J <j@x.org>\nOrigin: vendor\n---\nThis patch header follows DEP-3: "
     "http://dep.debian.net/deps/dep3/\n", ("Fix it", "", (("Origin", "vendor"),), "")),
    # Subject: and Author: with a Date: (no mbox From line): DEP-3's, the date kept
    ("Subject: Fix it\nAuthor: J <j@x.org>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nOrigin: vendor\n\n",
     ("Fix it", "", (("Origin", "vendor"),), "Mon, 1 Jan 2024 00:00:00 +0000")),
    # a mail's header with DEP-3 fields and trailers of its own: none of them dropped (X-... too)
    ("From: J <j@x.org>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: Fix it\nOrigin: vendor\nTested-by: T "
     "<t@x.org>\nX-Debian-Note: keep this\n\nLong.\n\n",
     ("Fix it", "Long.", (("Origin", "vendor"), ("Tested-by", "T <t@x.org>"), ("X-Debian-Note", "keep this")),
      "Mon, 1 Jan 2024 00:00:00 +0000")),
    # a line of one space in a Description is an empty line of it, not the header's end
    ("Description: Fix it\n one\n \n two\nAuthor: J <j@x.org>\nForwarded: no\n\n",
     ("Fix it", "one\n\ntwo", (("Forwarded", "no"),), "")),
    # a Subject: folded over lines is one line (its encoded words decoded), as a mail's
    ("From: J <j@x.org>\nSubject: [PATCH] =?UTF-8?q?a_long_subject_r=C3=A9?=\n =?UTF-8?q?ader_folded?=\n"
     "Origin: vendor\n\nBody.\n---\n", ("a long subject réader folded", "Body.", (("Origin", "vendor"),), "")),
])
def test_a_dep3_header_is_read_whole(header, want):
    """What a second fresh user found read wrongly: dh_make's '---' after the fields (refused), Subject + Author +
    Date ('no Author:'), a mail header's trailers dropped where a Date: was, a line of one space in a Description
    (the header ended there), a folded Subject (its second line taken as the description)."""
    got = read_mail(header + _D, "p.patch:1")
    assert (got.subject, got.description, got.trailers, got.date) == want, got


def test_an_empty_dep3_field_is_written_as_format_writes_it(pack3, tmp_path):  # noqa: F811
    """A field with no value ('Reviewed-by:') was written 'Reviewed-by: ' (a space at its end), which format --check
    then called stale: it is written as format writes it."""
    from fixpack.patchtext import normalize_text

    fix, text = _imported_quilt(pack3, tmp_path, "Description: Say fifty-five\nAuthor: A <a@example.org>\nReviewed-by:\n")
    assert "\nReviewed-by:\n" in text and normalize_text(fix, text) == text


def test_a_mail_whose_date_git_am_cannot_read_is_refused_at_its_line(pack3, tmp_path):  # noqa: F811
    """Two fresh users: 'Date: sometime last week' (or 2024-01-01) was written into the pack's patch as it was, and
    git am of it failed ('invalid date format'). Refused at the Date: line, nothing written."""
    builder, clean = pack3
    text = _mail(builder, "Why it matters.\n").replace("Date: Mon, 2 Jan 2023 10:00:00 +0100", "Date: sometime last week")
    assert "Date: sometime last week" in text
    mail = tmp_path / "x.patch"
    mail.write_text(text)
    line = text.split("\n").index("Date: sometime last week") + 1
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value).startswith(f"{mail}:{line}: Date: sometime last week: not a mail's date"), exc.value
    assert pack_bytes(builder.pack) == before


@pytest.mark.parametrize(("subject", "body", "says"), [
    ("Fix the \u202ereader", "Why.", "its Subject: holds U+202E, a bidirectional control"),
    ("Fix the =?UTF-8?q?=1B=5B2J?=reader", "Why.", "its Subject: holds U+001B (from an encoded word), a control "
                                                  "character, which a terminal acts on"),
    ("Fix the reader", "Why \x1b]8;;https://x.example/\x1b\\it matters.", "its description holds U+001B, a control"),
    ("Fix the reader", "Why.\n\nSee \u2066this\u2069.", "its description holds U+2066, a bidirectional control"),
])
def test_a_control_or_bidirectional_character_in_a_mail_s_message_is_refused_at_its_line(
        pack3, tmp_path, subject, body, says):  # noqa: F811
    """Found by a fresh user: a Subject holding an escape or a right-to-left override went into fix.toml's summary
    (what status prints) and the patch's header, where a DEP-3 header's was refused. Each is exit 2 at the line that
    holds it, nothing written."""
    builder, clean = pack3
    mail = tmp_path / "in.patch"
    text = mail_patch(builder.base, TOP, MID, subject="Placeholder subject", body="Placeholder.\n")
    text = text.replace("Placeholder.", body).replace("Placeholder subject", subject, 1)
    mail.write_text(text)
    marker = next(c for c in subject + body if ord(c) < 32 and c != "\n" or 0x202a <= ord(c) <= 0x2069) \
        if "=?" not in subject else "Subject:"
    line = next(n for n, ln in enumerate(text.split("\n"), 1) if marker in ln)
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    said = str(exc.value)
    assert said.startswith(f"{mail}:{line}: ") and says in said and "nothing was written" in said, said
    assert exc.value.exit_code == 2 and pack_bytes(builder.pack) == before
    assert "\x1b" not in said and "\u202e" not in said and "\u2066" not in said  # (the message shows them escaped)


def test_a_dep3_header_after_empty_lines_is_read_and_its_lines_named(pack3, tmp_path):  # noqa: F811
    """DEP-3: the header starts on the first line that is not empty (lines of spaces count as empty); a patch whose
    header came after empty lines was refused as having none. It is read as the same patch without them, and a
    field refused in it is named at its own line of the file."""
    builder, clean = pack3
    mail = tmp_path / "lead.patch"
    mail.write_text(_quilt(tmp_path, "\n  \n" + DEP3))
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    got = read_mail(load_pack(builder.pack).fixes["imp"].patches[0].path.read_text())
    assert (got.author, got.subject) == ("Ana Pérez <ana@example.org>", "Say fifty-five")
    assert _upstream(builder)["last_update"] == "2026-11-30"
    bad = tmp_path / "bad.patch"
    text = _quilt(tmp_path, "\n\n" + DEP3.replace("Last-Update: 2026-11-30", "Last-Update: soon"))
    bad.write_text(text)
    line = text.split("\n").index("Last-Update: soon") + 1
    with pytest.raises(BadInputError, match=rf"^{re.escape(str(bad))}:{line}: Last-Update: soon: not a date"):
        import_mails(builder.pack, bad, "imp2", "p1", roots={"demo": clean})


def _b64(text: str) -> str:
    """``text`` (a format-patch mail) with its body sent as base64, as a mail client may."""
    import base64

    head, _sep, body = text.partition("\n\n")
    coded = base64.encodebytes(body.encode()).decode()
    return (head + "\nMIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: base64"
            "\n\n" + coded)


@pytest.mark.parametrize(("change", "marker", "says"), [
    # (a second fresh user) a mail with a DEP-3 field in its header (format-patch --add-header) had no Subject check
    (lambda t: t.replace("Subject: [PATCH] Placeholder subject", "Bug-Debian: https://bugs.debian.org/1\nSubject: "
                         "[PATCH] =?UTF-8?q?Fix_=1B]0;pwned=07_reader?="), "Subject:",
     "its Subject: holds U+001B (from an encoded word)"),
    # an encoded line break in a mail's Subject was read as a space, where the README says it is refused
    (lambda t: t.replace("Placeholder subject", "=?UTF-8?q?Fix=0AFix-Id:_other?="), "Subject:",
     "its Subject: holds U+000A (from an encoded word), a line break, which would write a header line of its own"),
    # a body in base64: the line is not the file's, so the mail is named (a line of base64 was)
    (lambda t: _b64(t.replace("Placeholder.", "Line one.\n\nThird \u202e para.")), None,
     "its description holds U+202E, a bidirectional control"),
    # the same character in the From: line and the body: the first field that holds it, at its own line
    (lambda t: re.sub(r"(?m)^From: .*(\n[ \t].*)*$", "From: Ann \u202e <ann@example.org>", t, count=1).replace(
        "Placeholder.", "Why \u202e."), "From: Ann", "its author holds U+202E, a bidirectional control"),
    (lambda t: t.replace("Placeholder.", "Why.\n\nSigned-off-by: A \x1b[2J <a@example.org>"), "Signed-off-by",
     "its Signed-off-by: trailer holds U+001B"),
    # (a third fresh user) a Subject folded over lines, its second line's encoded word holding it: that line
    (lambda t: t.replace("Placeholder subject", "Fix the sampler\n =?UTF-8?q?in_=E2=80=AE_order?="), " =?UTF-8",
     "its Subject: holds U+202E (from an encoded word)"),
    # a form feed in a description is no header line: said as the control character it is
    (lambda t: t.replace("Placeholder.", "Why\x0c it matters."), "Why\x0c", "its description holds U+000C, a "
                                                                          "control character, which a terminal"),
])
def test_a_control_character_anywhere_in_a_mail_s_words_is_refused_at_the_line_that_holds_it(
        pack3, tmp_path, change, marker, says):  # noqa: F811
    """What a second fresh user found in the check above: a mail with a DEP-3 field in its header skipped it, an
    encoded line break in a Subject became a space, a body in base64 or quoted-printable was named at a line of the
    file that did not hold the character (or the From: line, for a character both held), and the author, the trailers
    and a DEP-3 header's other fields were not looked at. Exit 2 at the line that holds it (its mail where the file's
    lines are not the mail's), nothing written, the character escaped in the message."""
    builder, clean = pack3
    mail = tmp_path / "in.patch"
    text = change(mail_patch(builder.base, TOP, MID, subject="Placeholder subject", body="Placeholder.\n"))
    mail.write_text(text)
    where = f"{mail}:{next(n for n, ln in enumerate(text.split(chr(10)), 1) if ln.startswith(marker))}: " \
        if marker else f"{mail} (mail at line 1): "
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    from fixpack.cli_plain import failure_text

    said = failure_text(exc.value)
    assert said.startswith(where) and says in said and exc.value.exit_code == 2, said
    assert failure_text(exc.value, plain=False) == str(exc.value)  # (--json: the document escapes it as JSON does)
    assert pack_bytes(builder.pack) == before and not re.search("[\x00-\x09\x0b-\x1f\u202a-\u202e\u2066-\u2069]", said)


@pytest.mark.parametrize(("header", "marker", "says"), [
    ("Description: Say fifty-five\nAuthor: Ana <ana@example.org>\nOrigin: vendor \x1b[2J\n", "Origin:",
     "its Origin: trailer holds U+001B"),
    ("Description: Say fifty-five\n Long \u2067words\u2069.\nAuthor: Ana <ana@example.org>\n", " Long",
     "its description holds U+2067"),
    ("\n\nDescription: Say fifty-five\nOrigin: vendor\n", "Description:", "the DEP-3 header has no Author:"),
    ("\nSubject: Guard\n the sampler \u202e\nAuthor: Ana <ana@example.org>\n", " the sampler",
     "its Subject: holds U+202E"),  # (a folded Subject: the line that holds it)
])
def test_a_dep3_header_s_words_are_checked_and_named_at_their_lines(pack3, tmp_path, header, marker, says):  # noqa: F811
    builder, clean = pack3
    mail = tmp_path / "x.patch"
    text = _quilt(tmp_path, header)
    mail.write_text(text)
    line = next(n for n, ln in enumerate(text.split("\n"), 1) if ln.startswith(marker))
    with pytest.raises(BadInputError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert str(exc.value).startswith(f"{mail}:{line}: ") and says in str(exc.value), exc.value


def test_a_dep3_description_is_one_line_as_format_writes_it(pack3, tmp_path):  # noqa: F811
    """A tab or two spaces in a DEP-3 Description's first line were kept in the summary and the patch's Subject,
    which format --check then called stale: white space is one space, as a mail's Subject is read."""
    from fixpack.patchtext import normalize_text

    fix, text = _imported_quilt(pack3, tmp_path, "Description: Say\tfifty-five  now\u00a0here\nAuthor: Ana <ana@example.org>\n")
    assert fix.summary == "Say fifty-five now here" and normalize_text(fix, text) == text


@pytest.mark.parametrize(("trailers", "want"), [
    (f"Forwarded: {PULL}.", {"status": "submitted", "link": PULL}),  # (a sentence's dot: no part of the link)
    ("Forwarded: No.", {"status": "pending"}),
    ("Forwarded: not-needed (Gaudi only", {"status": "inappropriate", "reason": "Gaudi only"}),
    (f"Forwarded: yes\nLink: {PULL}", {"status": "submitted", "link": PULL}),  # (yes: the link says where)
    (f"Upstream-Status: Submitted [{PULL}]\nForwarded: yes", {"status": "submitted", "link": PULL}),
    # (a third fresh user: angle brackets and a sentence's dot, or a dot after a reason, were refused)
    (f"Forwarded: <{PULL}>.", {"status": "submitted", "link": PULL}),
    (f"Forwarded: yes <{PULL}>.", {"status": "submitted", "link": PULL}),
    ("Forwarded: not-needed (Gaudi only).", {"status": "inappropriate", "reason": "Gaudi only"}),
    # (a fifth fresh user: words after the note were taken into it from its first bracket to its last)
    ("Forwarded: not-needed (Gaudi only). Extra words", {"status": "inappropriate",
                                                        "reason": "(Gaudi only). Extra words"}),
    ("Forwarded: not-needed (Gaudi only) (second).", {"status": "inappropriate", "reason": "(Gaudi only) (second)"}),
    ("Forwarded: not-needed (reason (nested))", {"status": "inappropriate", "reason": "reason (nested)"}),
])
def test_forwarded_is_read_as_dep3_means_it(pack3, tmp_path, trailers, want):  # noqa: F811
    builder, clean = pack3
    mail = tmp_path / "in.patch"
    mail.write_text(_mail(builder, f"Why it matters.\n\n{trailers}\n"))
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    up = _upstream(builder)
    assert {k: up.get(k) for k in want} == want, up


def test_a_forwarded_near_dep3_s_words_is_told_how_dep3_reads_it(pack3, tmp_path):  # noqa: F811
    builder, clean = pack3
    mail = tmp_path / "in.patch"
    mail.write_text(_mail(builder, "Why it matters.\n\nForwarded: not needed\n"))
    with pytest.raises(BadInputError, match="DEP-3 reads any Forwarded: but no and not-needed as forwarded"):
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})


def test_empty_lines_above_a_mail_are_skipped_as_git_skips_them(pack3, tmp_path):  # noqa: F811
    """git mailsplit and mailinfo skip white space before a mail's header; a mail saved with empty lines first was
    refused as having no header, at an empty line."""
    builder, clean = pack3
    mail = tmp_path / "in.patch"
    text = mail_patch(builder.base, TOP, MID, subject="Say fifty-five", body="Why.\n")
    mail.write_text("\n \n" + text.split("\n", 1)[1])  # (no mbox From line: the mail starts at its From: header)
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert load_pack(builder.pack).fixes["imp"].summary == "Say fifty-five"


def test_what_a_fourth_fresh_user_found(pack3, tmp_path):  # noqa: F811
    """A mail whose header and message end their lines in CR LF (git am reads them as its lines: it imported before
    the words were checked) was refused as 'a Subject holding U+000D'; an empty Forwarded: <> was refused as
    disagreeing with itself; the refusals for no From: and an empty Subject: of an mbox mail named its second line;
    U+2028 in a description (str.splitlines reads a field line there) went through."""
    builder, clean = pack3
    base = mail_patch(builder.base, TOP, MID, subject="Say fifty-five", body="Why it matters.\n")
    head, sep, rest = base.partition("\n---\n")  # (its header's lines and the message's one line)
    mail = tmp_path / "crlf.patch"
    mail.write_bytes((head.replace("\n", "\r\n") + sep + rest).encode())
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert load_pack(builder.pack).fixes["imp"].summary == "Say fifty-five"

    empty = tmp_path / "empty.patch"  # (another change: the first is on the chain now)
    other = mail_patch(builder.base, MID, MID.replace("line 57\n", "fifty-seven\n"), subject="Say 57", body="Why.\n")
    empty.write_text(other.replace("\n---\n", "\n\nForwarded: <>\n---\n", 1))
    import_mails(builder.pack, empty, "imp2", "p1", roots={"demo": clean})

    before = pack_bytes(builder.pack)
    for drop, named in ((r"(?m)^From: .*(\n[ \t].*)*\n", "From "), (r"(?m)^Subject: .*$", "Subject:")):
        text = "\n\n" + re.sub(drop, "Subject: [PATCH]" if named == "Subject:" else "", base, count=1)
        bad = tmp_path / "bad.patch"
        bad.write_text(text)
        line = next(n for n, ln in enumerate(text.split("\n"), 1) if ln.startswith(named))
        with pytest.raises(BadInputError, match=rf"^{re.escape(str(bad))}:{line}: the mail"):
            import_mails(builder.pack, bad, "imp3", "p1", roots={"demo": clean})
    sep_mail = tmp_path / "sep.patch"
    sep_mail.write_text(base.replace("Why it matters.", "Why it matters.\u2028Fix-Id: evil"))
    with pytest.raises(BadInputError, match=r"its description holds U\+2028, a line or paragraph separator"):
        import_mails(builder.pack, sep_mail, "imp4", "p1", roots={"demo": clean})
    assert pack_bytes(builder.pack) == before
