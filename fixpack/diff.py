"""The diff adapter: the one place that parses patch files (through unidiff) and writes them.

A patch file is a git format-patch message: a mail-style header with a DEP-3 style description, a
``---`` line, then one ``diff --git`` section per file. :func:`parse_patch` turns its bytes into
:class:`~fixpack.patchmodel.FilePatch` objects whose hunks carry exact pre-image and post-image lines (line endings
included, so "\\ No newline at end of file" is honoured). :func:`format_patch` writes the
deterministic form used in the pack: a fixed ``From`` line, no dates, no commit hashes, no
trailing version signature, so that regenerating an unchanged patch shows no diff.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .binpatch import BinaryDataError, Budget, PackBudget, parse_binary
from .diffpaths import (
    PREFIX,
    REGENERATE,
    agrees,
    bad,
    binary_above,
    check_binary_line,
    check_no_newline,
    check_renames,
    clean_path,
    git_line_paths,
    index_line_at,
    names_given,
    no_hunks,
    past_the_hunk,
    plain_start,
    second_marker,
    side_past,
    signature_taken,
    spaced_agrees,
)
from .diffsyntax import (
    HUNK_HEADER,
    after_base_block,
    as_git_markers,
    base_block_at,
    base_follows,
    base_taken,
    binary_then_text,
    hunk_numbers,
    refuse_bad_modes,
    refuse_cr_only,
    refuse_crlf,
    refuse_not_utf8_message,
    refuse_stray_crlf,
    split_lines,
    unquote,
    unquoted_paths,
    wide_text,
    without_base_block,
)
from .errors import PatchParseError, Problem
from .patchmodel import FilePatch, Hunk, ParsedPatch, PatchHeader
from .plaindiff import PLAIN_NAMES, as_git, as_prefixed, git_prefixed, is_epoch
from .structs import replace

if TYPE_CHECKING:  # unidiff is imported by the first parse (a status the lock vouches for parses nothing)
    from unidiff.patch import Hunk as UHunk
    from unidiff.patch import PatchedFile, PatchSet

FIXED_FROM_LINE = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001"
AUTHOR = "vLLM Gaudi fix pack <fixpack@invalid>"


def parse_patch(data: bytes, source: str = "<patch>", pack: PackBudget | None = None) -> ParsedPatch:
    """Parse a patch file's bytes.

    Raises PatchParseError naming ``source`` and the line for a patch file converted to CRLF (or CR) line ends, a
    malformed diff, an absolute path or one that climbs out of the target with ``..``, a section whose
    ``diff --git``, ``---``/``+++`` and ``rename from``/``rename to`` lines name different files, or a copy
    (:func:`~fixpack.diffpaths.check_renames`). A file whose last line lacks its newline is read with it, as GNU
    patch reads it and as ``fixpack format`` writes it back (one reading for the applier, the lock and format).
    ``pack``: the binary bytes of the pack's patches parsed so far (its load's), which this one's count against."""
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    _refuse_binary(data, source)
    data += b"\n" if data and not data.endswith(b"\n") else b""  # (the last line read with its newline)
    # quilt's paths, and git diff --no-prefix's, as a/ b/, line for line (unidiff cannot split a spaced name without)
    text = git_prefixed(as_prefixed(data.decode("utf-8", "surrogateescape")))
    named = _check_structure(text, source)
    header = _parse_header(text)
    try:
        patchset = PatchSet(split_lines(as_git_markers(text)))
    except UnidiffParseError as exc:  # unidiff names the line it stopped at by its text: its number, found here
        said = str(exc).strip()
        kind, _sep, quoted = said.partition(": ")
        at = next((n for n, ln in enumerate(text.split("\n"), 1) if quoted and ln.rstrip() == quoted), None)
        said = f"{kind}: {data.decode('utf-8', 'surrogateescape').split(chr(10))[at - 1].rstrip()}" if at else said
        raise PatchParseError(f"{source}:{at}: malformed patch: {said}" if at else f"{source}: malformed patch: {said}",
                              [Problem(f"malformed patch: {said}", None, at, REGENERATE)]) from exc
    if not patchset and "diff --git" in text or not patchset and "@@ " in text:
        raise PatchParseError(f"{source}: malformed patch: no file section could be read")
    _all_sections_read(text, patchset, source)
    budget = Budget(pack)  # all the patch's binary blocks together (and the pack's)
    files = tuple(_canonical_modes(_with_data(_convert_file(pf, source), text, source, budget)) for pf in patchset)
    check_renames(files, named, source, text)
    budget.done()
    return ParsedPatch(header, files)


def _all_sections_read(text: str, patchset: PatchSet, source: str) -> None:
    """PatchParseError at the first 'diff --git' line whose file section unidiff did not read: it drops a section
    whose header it does not recognise without a word (a lone path, no path), so the change it carried (a mode, a
    rename) would be missed while the rest of the patch applied."""
    read = {str(pf.patch_info[0]).rstrip("\n") for pf in patchset if pf.patch_info}
    at = next((n for n, ln in enumerate(text.split("\n"), 1) if ln.startswith("diff --git ") and ln not in read), None)
    if at is not None:
        what = "malformed patch: a file section whose 'diff --git' line names no two files (a/X b/X) could not be read"
        raise PatchParseError(f"{source}:{at}: {what}", [Problem(what, None, at, REGENERATE)])


def _canonical_modes(fp: FilePatch) -> FilePatch:
    """A changed file's mode, the same on both sides, is known only from its ``index`` line, which format
    drops (churn) unless the section carries binary data: the change is read as format writes it."""
    if fp.old_path is None or fp.new_path is None or fp.old_mode != fp.new_mode or fp.data is not None:
        return fp
    return replace(fp, old_mode=None, new_mode=None)


def _with_data(fp: FilePatch, text: str, source: str, budget: Budget) -> FilePatch:
    """A binary file section's ``GIT binary patch`` data, read from its lines (unidiff skips them)."""
    if not fp.binary or not fp.diff_line:
        return fp
    lines = text.split("\n")
    index, index_line = None, 0
    for i in range(fp.diff_line, len(lines)):
        ln = lines[i]
        if ln.startswith("diff --git "):
            break
        if ln.startswith("index "):
            index, index_line = ln, i + 1
        elif ln == "GIT binary patch":
            try:
                return replace(fp, data=parse_binary(lines, i, index, index_line, budget)[0])
            except BinaryDataError as exc:
                raise bad(source, exc.line, exc.message) from exc
    return fp


_FILE_HEADER = ("diff --git ", "index ", "old mode ", "new mode ", "deleted file mode ", "new file mode ",
                "similarity index ", "dissimilarity index ", "rename from ", "rename to ", "copy from ",
                "copy to ", "Binary files ", "GIT binary patch")


_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # bytes that decoding with surrogateescape could not read



def _check_structure(text: str, source: str) -> list[tuple[int, str, str]]:
    """Walk the diff part line by line, as ``git apply`` does, before unidiff reads it.

    unidiff skips what it does not recognise; a lost ``@@`` line or a hunk whose header counts are wrong would
    then drop lines silently. Here every line must be a file header line, a hunk header with both ``@@``, or one of
    the lines its counts announce. Returns git's rename and copy lines, each as (line, ``"rename from"``/``"rename
    to"``/``"copy from"``/``"copy to"``, path), for :func:`check_renames`."""
    refuse_cr_only(text, source)
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.startswith("diff --git ")), None)
    start = plain_start(lines) if start is None else start
    for refuse in (refuse_crlf, refuse_not_utf8_message):  # (the mail part: the patch file's own lines)
        refuse(lines[:start] if start is not None else lines, 1, source)
    if start is None:
        return []
    refuse_bad_modes(lines[start:], start + 1, source)
    named: list[tuple[int, str, str]] = []
    old = new = hunk_line = 0
    header: tuple[str, int, int] = ("", 0, 0)  # the current hunk's @@ line, its pre-image and post-image counts
    ended = marker = 0  # the line where the last hunk's counts ran out, and the last '\\ No newline' marker's
    last = ""  # the kind of the previous hunk line (" ", "-", "+"); "" after anything else
    # a '-- ' line read as a removed line of the current hunk, maybe git format-patch's signature: (its line, the
    # pre-image and post-image lines the hunk still had to go before it)
    sig: tuple[int, int, int] | None = None
    hunks_in_file = 0
    shift = next_old = 0  # the file's earlier hunks: post-image minus pre-image lines, the pre-image line after them
    file_line = 0  # the line of the current file section's first header line (0: none yet)
    git_paths: tuple[str, str] | None = None  # the current section's 'diff --git' paths, prefixes dropped
    binary_data = False  # inside a 'GIT binary patch' section's data
    binary_said: tuple[int, str] = (0, "")  # the git section's 'Binary files ... differ' line (its line, its text)
    renamed = False  # git's rename/copy headers name a new path
    sides: set[str] = set()  # '---' / '+++' seen since the section's start or the last hunk header
    seen: dict[str, tuple[int, str]] = {}  # the section's '---' / '+++' lines: (line, path as git spells it)
    in_git = lines[start].startswith("diff --git ")  # else a plain diff: each file '---' then '+++'
    # names_given's flags: a git section's 'new file mode' / 'deleted file mode' lines ("new", "deleted"), or "plain"
    flags: set[str] = set() if in_git else {"plain"}
    # a plain section above the first 'diff --git' (or a diff quoted in the message): unidiff reads it, and the walk
    # below checks git sections only, so a lost @@ line there would drop its hunk unseen: refused
    if in_git and (early := plain_start(lines[:start], pair=True)) is not None:
        raise bad(source, early + 1, f"a file section above the first 'diff --git' line, without one of its own (a "
                                     f"diff mixing plain and git sections, or one quoted in the message): "
                                     f"{_shown(lines[early])}", "write every file's section with its 'diff --git' "
                                                                "line (git diff / format-patch)")
    if lines and lines[-1] == "":
        lines = lines[:-1]  # the split's artifact after the final newline, not a line
    for n, ln in enumerate(lines[start:], start + 1):
        if ln.startswith("\\") and marker == n - 1 and marker:
            raise second_marker(source, n, hunk_line)
        if ln.startswith("\\") and (old > 0 or new > 0 or last):
            check_no_newline(source, n, last, old, new, hunk_line)
            last, marker, ended = "", n, n if ended == n - 1 else ended
            continue
        if old > 0 or new > 0:
            kind = ln[:1]
            last = kind if kind in (" ", "-", "+") else " "
            if kind in (" ", ""):
                old, new = old - 1, new - 1
            elif kind == "-":
                sig = (n, old, new) if ln == "-- " else sig
                old -= 1
            elif kind == "+":
                new -= 1
                if _NOT_UTF8.search(ln):
                    raise bad(source, n, "an added line holds bytes that are not UTF-8 (the target's files are "
                                          "UTF-8 text; Python would refuse the source)",
                               "write the line as UTF-8 and regenerate the patch")
            elif kind != "\\" and sig is not None and sig[0] == n - 1 and not ln.startswith(("diff --git ", "@@")):
                raise signature_taken(source, sig, hunk_line)  # the line after a '-- ' breaks the hunk: no diff line
            elif kind != "\\" and not ln.startswith(("diff --git ", "@@", "-- ", *_FILE_HEADER)):
                raise bad(source, n, f"line {n} has no ' ', '+' or '-' prefix (inside the hunk that starts at line "
                                      f"{hunk_line}, {max(old, 0)} pre-image and {max(new, 0)} post-image lines "
                                      f"to go): {_shown(ln)}", "a context line starts with a space; restore the "
                                      "prefix or regenerate the patch with git diff / format-patch")
            elif kind != "\\":
                raise bad(source, n, f"the hunk that starts at line {hunk_line} ends early: {max(old, 0)} pre-image "
                                      f"and {max(new, 0)} post-image lines missing (its @@ counts are wrong, or a "
                                      f"line was lost)")
            if (old < 0 or new < 0) and sig is not None and sig[0] >= n - 1:  # past it by a '-- ' (or the line
                raise signature_taken(source, sig, hunk_line)  # after it): short, not long
            if old < 0 or new < 0:
                raise side_past(source, n, hunk_line, header, old, new)
            ended = n if old == 0 and new == 0 else ended
            if ended == n and ln == "" and base_follows(lines, n):
                raise base_taken(source, n, hunk_line)  # (--base's blank line above its block, counted)
            continue
        last = ""
        refuse_crlf([ln], n, source)
        if ln.startswith("@@"):
            m = HUNK_HEADER.match(ln)
            if not m:
                raise bad(source, n, f"malformed hunk header {ln[:60]!r} (expected '@@ -a,b +c,d @@')")
            if in_git and not hunks_in_file and n - 1 == file_line:  # git apply: patch fragment without header
                raise bad(source, n, "a hunk right under the 'diff --git' line, with no '---' / '+++' lines (git "
                                     "apply and git am refuse it)",
                          f"restore the file's '---' and '+++' lines, or {REGENERATE}")
            if in_git and not hunks_in_file or not in_git and sides == {"---"}:
                names_given(source, seen, flags)
            old, new, first_old, why = hunk_numbers(m, next_old, shift, hunk_line)
            if why:
                raise bad(source, n, f"hunk header {ln[:60]!r} does not add up: {why}",
                          f"fix the @@ line's numbers, or {REGENERATE}")
            shift, next_old = shift + new - old, first_old + old
            hunk_line, hunks_in_file, header = n, hunks_in_file + 1, (ln, old, new)
            sides, sig = set(), None
            continue
        if binary_data and not ln.startswith("diff --git "):
            continue  # read and checked line by line when the section is parsed (_with_data)
        if ln.startswith("diff --git "):
            if "\t" in ln:  # (git quotes a name that holds one; git apply and unidiff would read another split)
                raise bad(source, n, f"a TAB in the 'diff --git' line {_shown(ln)}: git writes a name that holds one "
                                     f"quoted (\"a/x\\ty\"), so which files the line names cannot be told",
                          f"quote the name as git does, or {REGENERATE}")
            binary_data = False
            if not hunks_in_file:
                names_given(source, seen, flags)
            git_paths = git_line_paths(ln, source, n)
            no_hunks(source, file_line, hunks_in_file, "+++" in seen)
            file_line, hunks_in_file, renamed, sides, seen, flags = n, 0, False, set(), {}, set()
            shift, next_old, binary_said = 0, 0, (0, "")
            continue
        if not file_line:
            file_line = n
        if ln.startswith(("--- ", "+++ ")):
            if in_git and binary_said[0]:  # (unidiff: two sections of one file, "a second section" said of it)
                raise binary_then_text(source, *binary_said, n)
            if in_git and hunks_in_file:  # git apply: a patch fragment without header
                raise bad(source, n, f"{_shown(ln)} after the file's hunks, outside any hunk (a hunk line past its @@ "
                                      f"counts, or a lost 'diff --git' line)")
            if ln[:3] in sides:  # unidiff would keep the last one; git apply refuses it
                raise bad(source, n, f"a second '{ln[:3]}' line for one file: {_shown(ln)}",
                           "keep one '---' and one '+++' line per file, or regenerate the patch")
            if ln.startswith("-") and "+++" in sides and in_git:  # unidiff (as GNU patch) reads '---' first
                raise bad(source, n, f"a '---' line after the file's '+++' line: {_shown(ln)}",
                           "put the '---' line before the '+++' line, or regenerate the patch")
            if ln.startswith("+") and "---" not in sides and not in_git:
                raise bad(source, n, f"a '+++' line with no '---' line before it: {_shown(ln)}",
                           "restore the file's '---' line, or regenerate the patch with git diff / format-patch")
            if ln.startswith("-") and not in_git:  # a plain diff's next file starts here
                seen, shift, next_old = {}, 0, 0
            sides.add(ln[:3])
            path = ln[4:].split("\t")[0]
            if path != "/dev/null":
                clean_path(path, source, n)
                path = unquote(path)  # a quoted path read as git spells it (_clean_path refused a bad one)
                agrees(git_paths, ln[0] == "+", path, source, n)
            seen[ln[:3]] = (n, path)
            if in_git and git_paths is None and ln[0] == "+" and "---" in seen:  # (names git_line_paths cannot split)
                spaced_agrees(lines[file_line - 1], seen["---"][1], path, source, file_line)
            if not in_git and (said := binary_above(lines, n, path)):  # (a plain diff's own line for the file)
                raise binary_then_text(source, *said, n, plain=True)
            minus = seen["---"][1] if "---" in sides else ""
            if ln.startswith("+") and minus and not renamed and "/dev/null" not in (minus, path) and \
                    PREFIX.sub("", minus) != PREFIX.sub("", path):
                # a name change without git's rename headers is a typo far more often than a rename, and
                # taking it for one would delete the upstream file: refuse it (git apply does too)
                raise bad(source, n, f"'+++ {path}' names another file than '--- {minus}' and no 'rename from/to' "
                                      f"lines say it is a rename", "fix the path, or regenerate the patch with git "
                                                                   "diff -M so the rename is declared" if in_git else
                          PLAIN_NAMES)
            continue
        if ln.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            renamed = True
            first, second, raw = ln.split(" ", 2)  # 'rename from <path>'
            named.append((n, f"{first} {second}", clean_path(raw, source, n, prefixed=False) or ""))
            continue
        if ln.startswith(_FILE_HEADER):
            if sides == {"---"} and not in_git:
                raise bad(source, n, f"{_shown(ln)} between a file's '---' and '+++' lines, in a diff without "
                                      f"'diff --git' lines (git apply: a patch fragment without header)",
                           "regenerate the patch with git diff / format-patch")
            if ln.startswith(("new file mode ", "deleted file mode ")):
                flags.add(ln.split(" ", 1)[0])
            binary_data = ln == "GIT binary patch"
            if ln.startswith("Binary files "):  # (after a text diff of its file: unidiff says "a second section")
                check_binary_line(source, n, ln, git_paths if in_git else None, in_git, seen)
                binary_said = (n, ln)
            continue
        if ln.startswith("\\"):
            raise bad(source, n, "a '\\ No newline at end of file' marker outside a hunk")
        if ln == "-- ":  # git format-patch's signature: the version line follows
            break
        if base_block_at(lines, n - 1):  # --base's block ends the diff (the signature after it): no section below
            after_base_block(source, lines, n)
            break
        if ln == "" and all(x == "" for x in lines[n - 1:]):
            break
        if sig is not None and sig[0] == n - 1:  # the hunk's last line was a '-- ': maybe the signature, taken
            raise signature_taken(source, sig, hunk_line)
        if not in_git and (ln.startswith(("diff ", "Only in ")) or index_line_at(lines, n - 1)) and not (old or new):
            continue  # diff -ruN's own lines between its files (git apply skips them too), quilt's 'Index:' lines
        if ended == n - 1 and (ln[:1] in (" ", "-", "+") or (ln == "" and _diff_follows(lines, n))):
            raise past_the_hunk(source, n, lines[n - 1:], hunk_line, header)
        raise bad(source, n, f"unexpected line outside a hunk: {_shown(ln)} (a lost @@ line, or text after the diff)")
    if (old > 0 or new > 0) and sig is not None and all(x == "" for x in lines[sig[0]:]):  # its last line a '-- '
        raise signature_taken(source, sig, hunk_line)
    if old > 0 or new > 0:
        raise bad(source, len(lines), f"the hunk that starts at line {hunk_line} ends early: {max(old, 0)} pre-image "
                                       f"and {max(new, 0)} post-image lines missing at the end of the patch")
    if in_git and not hunks_in_file:
        names_given(source, seen, flags)
    no_hunks(source, file_line, hunks_in_file, "+++" in seen)
    return named


def _diff_follows(lines: list[str], n: int) -> bool:
    """Whether the diff goes on after the blank line ``n`` (1-based) that follows a hunk's last counted line: its next
    line that is not blank is a hunk line, a marker, an @@ line or a file's header. Then the blank line is a context
    line whose space an editor stripped (one line more than the header states); text after the diff (a note, a
    signature) is not."""
    nxt = next((x for x in lines[n:] if x != ""), None)
    return nxt is not None and nxt != "-- " and (nxt[:1] in (" ", "-", "+", "\\", "@") or nxt.startswith("diff "))


def _shown(line: str) -> str:
    """A line of the patch as a message quotes it: its first 60 characters, or what it is when it is not
    text (bytes that are not UTF-8, control characters), rather than a dump of escaped bytes."""
    if _NOT_UTF8.search(line) or re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line):
        return f"{len(line.encode('utf-8', 'surrogateescape'))} bytes of binary data, not text"
    return repr(line[:60])


def _refuse_binary(data: bytes, source: str) -> None:
    """A file with a NUL byte is no patch (git writes even binary changes as text: ``git diff --binary``); one in
    UTF-16 or UTF-32 is named so (:func:`~fixpack.diffsyntax.wide_text`)."""
    idx = data.find(b"\0")
    wide = wide_text(data)
    if wide is not None:
        message = f"a patch saved as {wide[0]}, not UTF-8: a patch is UTF-8 text, as git format-patch writes it"
        hint = f"convert it to UTF-8 (iconv -f {wide[1]} -t UTF-8 FILE > NEW), or {REGENERATE}"
        raise PatchParseError(f"{source}:1: {message}", [Problem(message, None, 1, hint)])
    if idx >= 0:
        line = data.count(b"\n", 0, idx) + 1
        message = (f"a binary file, not a patch (a NUL byte at byte offset {idx}); a patch is the text "
                   f"git format-patch writes")
        raise PatchParseError(f"{source}:{line}: {message}", [Problem(message, None, line, REGENERATE)])


def _parse_header(text: str) -> PatchHeader:
    head = text.split("\ndiff --git ", 1)[0]
    # the added "\n" lets a "---" right above the first "diff --git" (format_patch's own form) end the header
    head = (head + "\n").split("\n---\n", 1)[0]
    subject = ""
    body: list[str] = []
    fields: list[tuple[str, str]] = []
    in_body = False
    for line in head.splitlines():
        if not in_body:
            if line.startswith("Subject:"):
                subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", line[len("Subject:"):].strip())
            elif line == "":
                in_body = True
            continue
        m = re.match(r"^([A-Z][A-Za-z-]+): (.*)$", line)
        if m:
            fields.append((m.group(1), m.group(2)))
        else:
            body.append(line)
    return PatchHeader(subject, "\n".join(body).strip(), tuple(fields))


def _created_deleted(pf: PatchedFile) -> tuple[bool, bool]:
    """Whether the file section creates its file, and whether it deletes it. In git's form only its own words say
    so: '/dev/null' on the ---/+++ lines, or 'new file mode' / 'deleted file mode' (unidiff reads those as
    '/dev/null' too); a hunk '@@ -0,0' fills an empty file there, and '+0,0 @@' empties one. unidiff also takes such a
    lone hunk for a created or deleted file; in a plain diff that holds where the side's time is the epoch (how
    'diff -N' writes a missing side, :func:`~fixpack.plaindiff.is_epoch`), as git apply reads it, else the hunk fills or
    empties a file that is there (a plain diff that emptied a file was applied as its deletion)."""
    if any(str(info).startswith("diff --git ") for info in pf.patch_info or ()):
        return pf.source_file == "/dev/null", pf.target_file == "/dev/null"
    return (pf.source_file == "/dev/null" or bool(pf.is_added_file) and is_epoch(pf.source_timestamp),
            pf.target_file == "/dev/null" or bool(pf.is_removed_file) and is_epoch(pf.target_timestamp))


def _convert_file(pf: PatchedFile, source: str) -> FilePatch:
    line = pf.diff_line_no
    created, deleted = _created_deleted(pf)
    old = None if created else clean_path(pf.source_file, source, line)
    new = None if deleted else clean_path(pf.target_file, source, line)
    hunk_lines = [(ln.line_type, ln.value, ln.diff_line_no or 0) for h in pf for ln in h]
    refuse_stray_crlf(hunk_lines, new or old or "", source, created)  # (a CR pasted into one line)
    hunks = tuple(_convert_hunk(h) for h in pf)
    if old == new and all(h.old_lines == h.new_lines for h in hunks) and not pf.is_binary_file and \
            pf.source_mode == pf.target_mode:  # a bare diff --git, or hunks of context alone (no + or - line)
        raise bad(source, line or 0, f"the file section for {new} changes nothing (no hunk with a + or - line, no "
                                     f"mode, rename or binary data): a lock would record the file unchanged",
                  f"remove it, or {REGENERATE}")
    return FilePatch(old, new, hunks, pf.source_mode, pf.target_mode, bool(pf.is_binary_file), line or 0)


def _convert_hunk(h: UHunk) -> Hunk:
    old: list[str] = []
    new: list[str] = []
    kinds: list[str] = []
    for ln in h:
        kind = ln.line_type
        if kind == "":  # (blank lines past the hunk's counts, at the end of the patch: an editor's, not the hunk's)
            continue
        if kind == "\\":
            # the line before has no newline at the end of the file
            if kinds and kinds[-1] in ("-", " ") and old:
                old[-1] = old[-1].removesuffix("\n")
            if kinds and kinds[-1] in ("+", " ") and new:
                new[-1] = new[-1].removesuffix("\n")
            continue
        value = ln.value
        if kind in ("-", " "):
            old.append(value)
        if kind in ("+", " "):
            new.append(value)
        kinds.append(kind)
    lead = next((i for i, k in enumerate(kinds) if k != " "), len(kinds))
    trail = next((i for i, k in enumerate(reversed(kinds)) if k != " "), len(kinds))
    header_line = ((h[0].diff_line_no or 1) - 1) if len(h) else 0
    # (the fingerprint is the change's: an editor's blank lines, which unidiff keeps at the hunk's end, change nothing)
    text = str(h)
    text = text[:len(text) - sum(len(str(ln)) for ln in h if ln.line_type == "")]
    return Hunk(h.source_start, h.source_length, h.target_start, h.target_length,
                tuple(old), tuple(new), lead, trail, header_line, text)


def diff_body(text: str) -> str:
    """The part of a patch file from the first ``diff --git`` line on (version signature dropped); a plain ``diff -u``
    (no ``diff --git`` line, as a mail git am takes may hold; quilt's) in git's form (:mod:`fixpack.plaindiff`)."""
    idx = text.find("diff --git ")
    if idx < 0:
        lines = text.split("\n")
        at = plain_start(lines)
        if at is None:
            return ""
        text, idx = as_git(as_prefixed("\n".join(lines[at:])).split("\n")), 0
    body = text[idx:]
    # git format-patch ends with "-- \n<version>\n"; it churns between git versions
    body = re.sub(r"\n-- \n[^\n]*\n*\Z", "\n", without_base_block(body))
    # index lines carry blob hashes that churn with unrelated metadata; modes are kept. A binary
    # section keeps its index line: its blob ids are how a binary side is recognised (binpatch)
    sections = re.split(r"(?m)^(?=diff --git )", body)
    body = "".join(sec if "\nGIT binary patch\n" in sec else
                   re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+( [0-7]+)?\n", "", sec, flags=re.M) for sec in sections)
    body = unquoted_paths(git_prefixed(body))  # git's a/ b/, and quoted paths in the pack's one spelling (diffsyntax)
    return body if body.endswith("\n") else body + "\n"


def format_patch(subject: str, description: str, fields: list[tuple[str, str]], body: str) -> str:
    """Write a patch file deterministically: fixed From line and author, no date, no hashes.

    ``body`` is the diff part (from ``diff --git`` on); see :func:`diff_body`.
    """
    lines = [FIXED_FROM_LINE, f"From: {AUTHOR}", f"Subject: [PATCH] {subject.strip()}", ""]
    if description.strip():
        lines += [description.strip(), ""]
    lines += [f"{k}: {v}" for k, v in fields]
    lines += ["---", ""]
    return "\n".join(lines) + diff_body(body)
