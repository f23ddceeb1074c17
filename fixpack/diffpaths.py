"""The paths a patch's file headers name, each checked: canonical (:func:`clean_path`), and the same file
wherever a section names it. A section's ``diff --git a/X b/Y`` line, its ``---``/``+++`` lines and git's
``rename from``/``rename to`` lines must agree (:func:`agrees`, :func:`check_renames`): the engine reads the
change at the ``diff --git`` (and ``---``/``+++``) paths, ``git apply`` at the rename lines' when they are
there, so a patch whose lines disagree would be applied to one file here and to another by git.

Every error is a :class:`~fixpack.errors.PatchParseError` (exit 2) naming the patch file and the line.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import TYPE_CHECKING

from .diffsyntax import QuoteError, base_block_at, binary_after_text, unquote
from .errors import PatchParseError, Problem
from .safepath import STATE_DIR, climbs_out, path_problem

if TYPE_CHECKING:
    from .patchmodel import FilePatch

PREFIX = re.compile(r"^[ab]/")  # git's side prefixes, dropped from a path
REGENERATE = "regenerate the patch with git diff / format-patch"
# a 'diff --git' line's two paths, as git spells them (quoted or not; one with a space is not split)
GIT_LINE = re.compile(r'^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$')
_SEPARATOR = re.compile(r"={20,}")  # quilt's (and svn's) line under 'Index: '
COPY = "regenerate the patch without copy detection (git diff -M, no -C / --find-copies): the copy is then a new file"


def bad(source: str, line: int, message: str, hint: str = REGENERATE) -> PatchParseError:
    """The error for ``message`` at ``line`` (1-based) of the patch file ``source``, with what to do."""
    return PatchParseError(f"{source}:{line}: {message}", [Problem(message, None, line, hint)])


def clean_path(raw: str | None, source: str, line: int | None, prefixed: bool = True) -> str | None:
    """The target path a patch line names (its ``a/``/``b/`` prefix dropped unless ``prefixed`` is False;
    None for ``/dev/null``), refused unless canonical: ``./x``, ``x//y`` or ``x/.`` name the same file as
    ``x`` on disk but not as a manifest key, so a fix would be recorded under one spelling and checked under
    another. Raises PatchParseError for such a path, an absolute one, one with ``..``, or bad quoting."""
    if raw is None or raw == "/dev/null":
        return None
    try:
        raw = unquote(raw)
    except QuoteError as exc:
        raise bad(source, line or 0, f"path {raw}: {exc}") from exc
    path = PREFIX.sub("", raw) if prefixed else raw
    problem = path_problem(path)
    if problem is None:
        return path
    if path.startswith("/") or climbs_out(path.split("/")):
        what = "absolute path" if path.startswith("/") else "path"
        raise PatchParseError(
            f"{source}:{line}: {what} {path!r} climbs out of the target" if what == "path" else
            f"{source}:{line}: absolute path {path!r} in a patch",
            [Problem(f"{what} {path!r} escapes the target root", None, line,
                     "paths must be relative to the target root")])
    if path.split("/")[0] == STATE_DIR:
        raise PatchParseError(f"{source}:{line}: path {path!r} lies in {problem}",
                              [Problem(f"path {path!r} lies in {problem}", None, line,
                                       f"a fix changes the target's own files only, the tool keeps {STATE_DIR}/ "
                                       f"itself: drop this file's section from the patch")])
    hint = "name the file without it" if problem.startswith("a control") else \
        "write the path as git does: relative, '/' between segments, no '.', '..' or '//'"
    raise PatchParseError(f"{source}:{line}: path {path!r} is not canonical: {problem}",
                          [Problem(f"path {path!r} is not canonical: {problem}", None, line, hint)])


def git_line_paths(ln: str, source: str, n: int) -> tuple[str, str] | None:
    """The paths of a ``diff --git a/X b/Y`` line, checked and without their prefixes (None for a path
    with spaces: the ---/+++ lines then name the files alone)."""
    m = GIT_LINE.match(ln)
    if not m:
        return None
    a, b = (clean_path(raw, source, n) or "" for raw in m.groups())
    return a, b


def agrees(git_paths: tuple[str, str] | None, plus: bool, path: str, source: str, n: int) -> None:
    """A ``---``/``+++`` line names the file its section's ``diff --git`` line names (one was edited
    by hand when they differ: which file the change is for cannot be told)."""
    if git_paths is None:
        return
    want = git_paths[1] if plus else git_paths[0]
    if PREFIX.sub("", path) != want:
        side = "+++" if plus else "---"
        raise bad(source, n, f"'{side} {path}' names another file than its 'diff --git' line ({want!r}); the "
                             f"two lines disagree", "make both name the same file, or regenerate the patch "
                                                    "with git diff / format-patch")


def spaced_agrees(git_line: str, old: str, new: str, source: str, n: int) -> None:
    """A ``diff --git`` line (``git_line``, at ``n``) whose names :func:`git_line_paths` cannot split (a space in one,
    or after them) names the files its ``---``/``+++`` lines name (``old``, ``new``: unquoted, ``/dev/null`` for none),
    split at some space: which file a section changes must not rest on the ``---``/``+++`` lines alone where the two
    disagree (a space typed after ``b/X`` was read by unidiff as another file, "Target without source")."""
    a, b = (new if old == "/dev/null" else old), (old if new == "/dev/null" else new)
    want = (PREFIX.sub("", a), PREFIX.sub("", b))
    rest = git_line.removeprefix("diff --git ")
    for m in re.finditer(" ", rest):
        try:
            if tuple(PREFIX.sub("", unquote(x)) for x in (rest[:m.start()], rest[m.end():])) == want:
                return
        except QuoteError:
            continue
    raise bad(source, n, f"{git_line[:120]!r} does not name the files its '---' and '+++' lines name ({want[0]!r}, "
                         f"{want[1]!r}; a space before or after a name?)",
              "make the lines name the same files, or regenerate the patch with git diff / format-patch")


def binary_pairs(line: str) -> list[tuple[str, str]]:
    """The two names a ``Binary files A and B differ`` line may give, for each way to split it at `` and `` (a name
    may hold the words): quoted names unquoted, git's ``a/``/``b/`` dropped, ``/dev/null`` kept."""
    middle = line.removeprefix("Binary files ").removesuffix(" differ")
    out = []
    for m in re.finditer(" and ", middle):
        try:
            a, b = (unquote(x) for x in (middle[:m.start()], middle[m.end():]))
        except QuoteError:
            continue
        out.append((PREFIX.sub("", a) if a != "/dev/null" else a, PREFIX.sub("", b) if b != "/dev/null" else b))
    return out


def binary_names(line: str, path: str) -> bool:
    """A ``Binary files A and B differ`` line names the file ``path`` (``a/``/``b/`` dropped)."""
    return any(PREFIX.sub("", path) in pair for pair in binary_pairs(line)) and path != "/dev/null"


def binary_above(lines: list[str], n: int, path: str) -> tuple[int, str] | None:
    """In a plain diff, a ``Binary files`` line that names ``path`` (its line and text) among the lines diff -r writes
    between files (``diff ...``, ``Only in ...``, ``Binary files ...``) right above the file header at line ``n`` (a
    ``---`` line, or the ``+++`` line below one)."""
    i = n - 2 if not (lines[n - 1].startswith("+++ ") and n > 1 and lines[n - 2].startswith("--- ")) else n - 3
    while i >= 0 and lines[i].startswith(("Binary files ", "diff ", "Only in ")):
        if lines[i].startswith("Binary files ") and binary_names(lines[i], path):
            return i + 1, lines[i]
        i -= 1
    return None


def check_binary_line(source: str, n: int, line: str, git_paths: tuple[str, str] | None, in_git: bool,
                      seen: dict[str, tuple[int, str]]) -> None:
    """A ``Binary files A and B differ`` line (at ``n``) names its section's file, as its ``diff --git`` line
    (``git_paths``; None where they cannot be told) names it, and comes after no text diff of that file: in a git
    section (``in_git``), none at all (``seen``: the section's ``---``/``+++`` lines, their line and path); in a plain
    diff, none of the file it names (the next file, another one, may be binary: diff -r writes the line for it)."""
    pairs = binary_pairs(line)
    if git_paths is not None and pairs and not any(a in ("/dev/null", git_paths[0]) and b in ("/dev/null", git_paths[1])
                                                   for a, b in pairs):
        want = git_paths[0] if git_paths[0] == git_paths[1] else f"{git_paths[0]} -> {git_paths[1]}"
        raise bad(source, n, f"{line[:120]!r} names another file than its section's 'diff --git' line ({want!r}); the "
                             f"two lines disagree", "make both name the same file, or regenerate the patch with git "
                                                    "diff / format-patch")
    if seen and (in_git or any(binary_names(line, path) for _n, path in seen.values())):
        raise binary_after_text(source, n, line, min(at for at, _path in seen.values()))


def check_renames(files: tuple[FilePatch, ...], named: list[tuple[int, str, str]], source: str, text: str = "") -> None:
    """Each of git's ``rename from``/``rename to`` lines, ``named`` as (line, ``"rename from"`` or ``"rename
    to"`` or a ``copy`` word, path without quotes), names the file the engine reads its section's change
    from/at (``files``: the parsed sections, in order; each header belongs to the last one starting above it),
    and a section whose two paths differ (a rename) has both lines, as ``git apply`` needs.

    Raises PatchParseError at the header's line when they disagree (git would write the rename line's file,
    the engine the ``diff --git`` line's), for a copy (``copy from/to``: the engine has no copies, and would
    read one as a rename, deleting the copied file), for a rename line outside a ``diff --git`` section, and
    at the section's line for a rename without its two lines, and at the second section that names a file one
    before it names (git apply would apply the two in turn; the engine places a file's hunks once). ``text``: the
    patch's, to tell a plain section (``---`` / ``+++``, no ``diff --git`` line: quilt's after git's) from git's."""
    starts = [fp.diff_line for fp in files]
    found: dict[int, set[str]] = {}
    for n, word, path in named:
        i = bisect_right(starts, n) - 1
        if word.startswith("copy"):
            raise bad(source, n, f"'{word} {path}': a copy (git diff -C) is not supported: it would be read as a "
                                 f"rename, and the copied file deleted", COPY)
        if i < 0:
            raise bad(source, n, f"'{word} {path}' outside a 'diff --git' section (git reads rename lines only in "
                                 f"its own file headers)")
        fp = files[i]
        want = fp.new_path if word == "rename to" else fp.old_path
        if path != want:
            other = want or "/dev/null"
            side, to, does = ("b", "to", f"write the renamed file to {path!r}, fixpack to {other!r}") \
                if word == "rename to" else ("a", "from", f"rename {path!r}, fixpack {other!r}")
            blank = " (the two differ only in white space at an end)" if path.strip() == other.strip() else ""
            raise bad(source, n, f"'{word} {path}' names another file than its 'diff --git' line's {side}-path "
                                 f"({other!r}, line {fp.diff_line}): git apply would {does}{blank}",
                      f"make the two lines name the same file, the one the rename is {to}, or regenerate the patch "
                      f"with git diff -M / format-patch")
        found.setdefault(i, set()).add(word)
    seen: dict[str, int] = {}
    for fp in files:
        for path in {p for p in (fp.old_path, fp.new_path) if p is not None}:
            if path in seen:
                raise bad(source, fp.diff_line, f"a second section for {path!r} (the first at line {seen[path]}): "
                                                f"git diff writes one section a file, and fixpack changes a file once "
                                                f"a patch", "make the two one section: regenerate the patch with git "
                                                              "diff (or git format-patch) from a tree it is applied to")
            seen[path] = fp.diff_line
    for i, fp in enumerate(files):
        if fp.kind != "rename" or found.get(i) == {"rename from", "rename to"}:
            continue
        lines = text.split("\n")  # (a refusal's words only: a plain section's are not git's)
        if 0 < fp.diff_line <= len(lines) and lines[fp.diff_line - 1].startswith(("--- ", "+++ ")):
            among = any(ln.startswith("diff --git ") for ln in lines)
            raise bad(source, fp.diff_line, f"a plain diff section ('---' / '+++', no 'diff --git' line) "
                                            f"{'among git sections ' if among else ''}names two files "
                                            f"({fp.old_path!r}, {fp.new_path!r}): a plain diff declares no rename"
                                            + (", and beside git's sections its paths are read as git's (a/ and b/ "
                                               "less), not as quilt's or diff -u's" if among else ""),
                      "make the patch one form: regenerate it with git diff / format-patch" +
                      (", or import the plain diff as a patch of its own" if among else ""))
        raise bad(source, fp.diff_line, f"'diff --git' names two files ({fp.old_path!r}, {fp.new_path!r}) but no "
                                        f"'rename from' and 'rename to' lines say it is a rename",
                  "fix the path, or regenerate the patch with git diff -M so the rename is declared")


def index_line_at(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` (0-based) is quilt's ``Index: PATH`` line or the line of ``=`` under it, above a file's
    section: text of the diff, not of a hunk or the mail."""
    if lines[i].startswith("Index: "):
        return i + 1 < len(lines) and bool(_SEPARATOR.fullmatch(lines[i + 1]))
    return bool(_SEPARATOR.fullmatch(lines[i])) and i > 0 and lines[i - 1].startswith("Index: ")


def plain_start(lines: list[str], pair: bool = False) -> int | None:
    """Where a diff without ``diff --git`` lines starts (before it: the mail's lines): its first ``---`` or ``+++``
    line from which only ``---`` / ``+++`` / ``index`` lines lead to an ``@@`` line (``pair``: or a ``---`` line
    right above a ``+++`` line, whatever follows), or quilt's ``Index:`` line or diff -ru's command line above it; None
    without one."""
    for i, ln in enumerate(lines):
        if pair and ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return i
        if ln.startswith(("--- ", "+++ ")):
            j = i
            while j < len(lines) and lines[j].startswith(("--- ", "+++ ", "index ")):
                j += 1
            if j < len(lines) and lines[j].startswith("@@"):  # (a malformed header too: the structure check names it)
                if i >= 1 and lines[i - 1].startswith("diff ") and not lines[i - 1].startswith("diff --git "):
                    return i - 1  # (diff -ru's command line above its first file: the diff's, not the message's)
                return i - 2 if i >= 2 and index_line_at(lines, i - 2) else i  # (quilt's 'Index:' lines: the diff's)
    return None


def names_given(source: str, seen: dict[str, tuple[int, str]], flags: set[str]) -> None:
    """git apply's rule for a file section's names (``seen``: its ``---`` / ``+++`` lines as (line, path); ``flags``:
    "new" / "deleted" for its ``new file mode`` / ``deleted file mode`` lines, "plain" for a diff without
    ``diff --git`` lines, whose every file needs both lines). In a ``diff --git`` section ``/dev/null`` stands on the
    ``---`` line exactly where the file is new and on the ``+++`` line exactly where it is deleted (else git reads
    a file named dev/null, or refuses "expected /dev/null"); one name line without the other is "git diff header
    lacks filename information" unless the file is new (no pre-image name needed) or deleted (no post-image name);
    neither is fine (the ``diff --git`` line names the file). PatchParseError at the line at fault."""
    old, new = seen.get("---"), seen.get("+++")
    if "plain" not in flags:
        for got, side, kind in ((old, "---", "new"), (new, "+++", "deleted")):
            if got and kind in flags and got[1] != "/dev/null":
                raise bad(source, got[0], f"a {kind} file's '{side}' line names a file, not /dev/null: "
                                          f"{f'{side} {got[1]}'[:60]!r}")
            if got and kind not in flags and got[1] == "/dev/null":
                raise bad(source, got[0], f"'{side} /dev/null' in a section with no '{kind} file mode' line "
                                          f"(/dev/null stands there for a {kind} file only)")
        old, new = (None if x and x[1] == "/dev/null" else x for x in (old, new))  # /dev/null names none
    if old and not new and "deleted" not in flags:
        raise bad(source, old[0], f"a '---' line with no '+++' line after it (the file's post-image name is missing): "
                                  f"{f'--- {old[1]}'[:60]!r}", f"restore the file's '+++' line, or {REGENERATE}")
    if new and not old and "new" not in flags:
        raise bad(source, new[0], f"a '+++' line with no '---' line before it (the file's pre-image name is missing): "
                                  f"{f'+++ {new[1]}'[:60]!r}", f"restore the file's '---' line, or {REGENERATE}")


def signature_taken(source: str, sig: tuple[int, int, int], hunk_line: int) -> PatchParseError:
    """The hunk at ``hunk_line`` read a ``-- `` line as its last removed line (``sig``: that line, the pre-image and
    post-image lines the hunk still had to go before it), and what follows does not fit: most likely git
    format-patch's signature (``-- ``, then its version line) taken by a hunk whose @@ counts claim more lines than it
    has. Where that line completed the hunk, it may as well be the hunk's own last line (it removes ``- ``) with the
    signature's ``-- `` line lost after it: both readings are said. The error is at the ``-- `` line."""
    at, old, new = sig
    if (old, new) == (1, 0):
        return bad(source, at, f"line {at}, '-- ', ends the hunk that starts at line {hunk_line}, and what follows is "
                               f"no diff: either the @@ counts claim one removed line more than the hunk has and git "
                               f"format-patch's signature line was read as that line, or the hunk's own last line "
                               f"removes '- ' and the signature's '-- ' line is missing after it",
                   f"fix the @@ line's numbers or put the signature's '-- ' line back, or {REGENERATE}")
    return bad(source, at, f"the hunk that starts at line {hunk_line} ends early: line {at}, '-- ' (git format-patch's "
                           f"signature line, most likely), was read as one of its removed lines, with {old} pre-image "
                           f"and {new} post-image lines still to go before it",
               f"fix the @@ line's numbers, or {REGENERATE}")


def check_no_newline(source: str, n: int, last: str, old: int, new: int, hunk_line: int) -> None:
    """``\\ No newline at end of file`` belongs right after the last line of a side of the hunk: after
    a removed line that ends the pre-image, an added line that ends the post-image, or a context line
    that ends both. Anywhere else git's own checks differ from what the line means, and the applier
    would strip a newline from the middle of a file."""
    ends = {"-": old == 0, "+": new == 0, " ": old == 0 and new == 0}.get(last, False)
    if not ends:
        raise bad(source, n, f"a '\\ No newline at end of file' marker in the middle of the hunk that starts at "
                              f"line {hunk_line} (it may only follow the last line of the pre-image or post-image)")


def second_marker(source: str, n: int, hunk_line: int) -> PatchParseError:
    """A '\\ No newline at end of file' marker right after another: it was said to be one in the middle of the hunk
    (or outside one), though what is wrong is that it is there twice."""
    return bad(source, n, f"a second '\\ No newline at end of file' marker (line {n - 1} has one already) in the hunk "
                          f"that starts at line {hunk_line}: a side of a hunk ends once, so one marker follows it",
               f"remove the second marker, or {REGENERATE}")


def past_the_hunk(source: str, n: int, rest: list[str], hunk_line: int,
                  header: tuple[str, int, int]) -> PatchParseError:
    """A hunk line (' ', '-', '+', or a blank line: a context line whose space an editor stripped) right after the
    hunk whose counts ran out at the line before ``n``: said as a hunk with more lines than its header states (its @@
    line and counts, how many such lines follow, a '\\ No newline' marker not counted), not as a line outside a hunk;
    when more than one follows, the other reading too (a hunk's @@ line lost before line ``n``)."""
    end = next((i for i, ln in enumerate(rest) if (ln[:1] not in (" ", "-", "+", "\\") and ln != "") or ln == "-- "
                or ln.startswith(("--- ", "+++ ")) or base_block_at(rest, i)), len(rest))
    while end == len(rest) and end > 1 and rest[end - 1] == "":  # (blank lines that end the patch: an editor's)
        end -= 1
        rest = rest[:end]
    more = sum(1 for ln in rest[:end] if not ln.startswith("\\"))  # (a marker belongs to the line before it)
    lines = "1 more line follows it" if more == 1 else f"{more} more lines follow it (lines {n}-{n + end - 1})"
    text, old, new = header
    return bad(source, n, f"the hunk that starts at line {hunk_line} has more lines than its header {text!r} states "
                          f"({old} pre-image and {new} post-image lines): {lines}"
                          + ("" if more == 1 else f", or the @@ line of a hunk that starts at line {n} was lost"),
               "fix the @@ line's numbers" + ("" if more == 1 else " or restore the lost @@ line") +
               f", or {REGENERATE}")


def side_past(source: str, n: int, hunk_line: int, header: tuple[str, int, int], old: int, new: int) -> PatchParseError:
    """Line ``n`` inside a hunk goes one line past a side its @@ header counts (``old`` or ``new``, the lines left to go
    once it is counted, is below 0) while the other side still has lines to go: said as :func:`past_the_hunk` says a
    hunk with more lines than its header states, naming the side."""
    text, pre, post = header
    side = "pre-image" if old < 0 else "post-image"
    return bad(source, n, f"the hunk that starts at line {hunk_line} has more lines than its header {text!r} states "
                          f"({pre} pre-image and {post} post-image lines): line {n} is one {side} line past them",
               f"fix the @@ line's numbers, or {REGENERATE}")


def no_hunks(source: str, file_line: int, hunks: int, has_plus: bool) -> None:
    """A file section with ---/+++ lines but no hunk announces a change it does not carry."""
    if file_line and has_plus and not hunks:
        raise bad(source, file_line, "a file section with ---/+++ lines but no hunk")
