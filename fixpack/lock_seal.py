"""A lock whose content does not match its seal (its ``"digest"``): it was edited by hand after ``fixpack lock``
wrote it. Where, the seal cannot say (it is one sha256 over the whole); what can be told is said, and nothing
is guessed:

- the chain: each file's pre-image in a fix's entry is the post-image of the fix before it that touches that
  file (of its target), as ``lock`` records them; two that differ are named, both lines (either was edited), in a
  lock sealed again too where the patches are held to it (:func:`chain_broken`);
- the pack (:func:`against_pack`): an entry's ``version`` or ``patch_sha256`` that is not what the pack says of
  that fix is named at its line, with where the pack says it (the pack may have changed since, too);
- the patches (:func:`post_edited`): a post-image that is not what the fix's patch makes of the pre-image the lock
  records for it, or a pre-image of which the patch makes the post-image the lock records though the file is not
  that pre-image, met as apply and status lay the fix (a lock edited and sealed again: the seal is a plain sha256);
  a hunk's recorded sides (:func:`hunks_edited`) that are not the patch's, where the patch is parsed anyway.

A lock laid out otherwise than ``lock`` writes it (one key a line) is named without lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import FixpackError, StaleLockError

if TYPE_CHECKING:
    from .lock_shape import KeyPath, Where
    from .model import Fix, Profile
    from .records import Lock, LockFix

SEAL_SAID = "its content does not match its seal"


def entry_wrong(text: str, fixes: list[Any], path: Path, n: int, what: str, where: Where) -> tuple[str, int | None,
                                                                                                   bool]:
    """What to say of a lock at ``path`` (``text``) whose ``n``-th entry of its ``fixes`` is not as ``lock`` writes
    one (``what``, at ``where``: :func:`fixpack.lock_shape.entry_problem`), the line of that key or entry (the entry's
    first line when the key is not there; None when the lock is laid out otherwise), and whether the line is said."""
    lines = text.splitlines()
    spans = _fix_spans(lines, len(fixes))
    line = _where_line(lines, spans[n], where) if spans else None
    fid = fixes[n].get("id") if isinstance(fixes[n], dict) else None
    named = f" (id {json.dumps(fid)[:80]})" if isinstance(fid, str) else ""
    return f"entry {n + 1} of its \"fixes\"{named} is not one `fixpack lock` writes: {what}", line, line is not None


def doc_wrong(text: str, whose: str, what: str, keys: KeyPath) -> tuple[str, int | None, bool]:
    """What to say of a lock (``text``) that is not as ``lock`` writes one outside its fix entries (``whose``, ``what``
    and ``keys``: :func:`fixpack.lock_shape.lock_problem`), the line of ``keys`` (None when the lock is laid out
    otherwise, or ``keys`` names the lock itself), and whether the line is said."""
    line = line_of_keys(text.splitlines(), keys)
    return f"{whose} is not one `fixpack lock` writes: {what}" if whose else what, line, line is not None


def line_of_keys(lines: list[str], keys: KeyPath) -> int | None:
    """The 1-based line of ``keys`` (:data:`~fixpack.lock_shape.KeyPath`) in a lock's ``lines`` laid out as ``lock``
    writes it (:func:`fixpack.records.dumps`: indent 2, a key or a list's entry a line, an object's or a list's
    content indented one step more); None when it is laid out otherwise or ``keys`` is empty."""
    first, last, line = 0, len(lines), None
    for depth, key in enumerate(keys, 1):
        pad = "  " * depth
        if isinstance(key, int):  # (an entry's first line: at this indent, no closing bracket)
            starts = [m for m in range(first, last) if lines[m].startswith(pad) and lines[m][len(pad):][:1] not in
                      ("", " ", "}", "]")]
            at = starts[key] if key < len(starts) else None
        else:
            at = next((m for m in range(first, last) if lines[m].startswith(f"{pad}{json.dumps(key)}: ")), None)
        if at is None:
            return None
        line, first = at + 1, at + 1
        last = next((m for m in range(first, last) if not lines[m].startswith(pad + " ")), last)
    return line


def _where_line(lines: list[str], span: tuple[int, int], where: Where) -> int:
    """The 1-based line of ``where`` in a fix entry (``span``, as ``lock`` lays it out): its key's line, else the first
    line of the file or hunk entry it names, else the fix entry's first line."""
    kind, k, key = where
    first, last = span
    if kind != "fix":
        item = _item_span(lines, span, kind, k)
        if item is None:
            return first + 1
        first, last = item
    if key is None:
        return first + 1
    mark = " " * (6 if kind == "fix" else 10) + f"{json.dumps(key)}: "
    return next((m + 1 for m in range(first, last + 1) if lines[m].startswith(mark)), first + 1)


def _item_span(lines: list[str], span: tuple[int, int] | None, kind: str, k: int) -> tuple[int, int] | None:
    """The lines (0-based, first and last) of the ``k``-th entry of a fix entry's ``kind`` list ("files" or "hunks";
    ``span``: the fix entry's lines), as ``lock`` lays it out; None when it is laid out otherwise."""
    if span is None:
        return None
    first, last = span
    at = next((m for m in range(first, last) if lines[m] == f'      "{kind}": ['), None)
    if at is None:
        return None
    starts, end = [], last
    for m in range(at + 1, last):
        if lines[m].startswith("      ]"):
            end = m
            break
        if lines[m] == "        {":
            starts.append(m)
    if k >= len(starts):
        return None
    ends = [*starts[k + 1:], end]
    return starts[k], ends[0] - 1


def unsealed(text: str, fixes: list[dict[str, Any]], path: Path) -> tuple[str, int | None, bool]:
    """What to say of a lock at ``path`` (``text``, its ``fixes`` well formed) whose digest does not match, its
    ``"digest"`` line (None: no such line), and whether that line is said."""
    lines = text.splitlines()
    line = next((n for n, ln in enumerate(lines, 1) if ln.strip().startswith('"digest": ')), None)
    at = partial(_at, path, lines, _fix_spans(lines, len(fixes)))
    breaks: list[str] = []
    last: dict[tuple[str, str], tuple[int, dict[str, Any], str | None]] = {}
    for n, fix in enumerate(fixes):
        for entry in fix.get("files", []):
            key = (fix.get("target", ""), entry["path"])
            if key in last and last[key][2] != entry.get("pre"):
                m, before, _ = last[key]
                was, now = at(m, entry["path"], "post"), at(n, entry["path"], "pre")
                breaks.append(f"fix {before['id']}'s post-image of {entry['path']} ({was}) and fix {fix['id']}'s "
                              f"pre-image of it ({now}) differ, where a lock has them equal: one of the two was edited")
            last[key] = (n, fix, entry.get("post"))
    said = f'{SEAL_SAID} (its "digest"): it was edited by hand after `fixpack lock` wrote it'
    what = f"{said}; {'; '.join(breaks)}" if breaks else f"{said} (which line, the lock alone cannot tell)"
    return what, line, line is not None


def against_pack(text: str, path: Path, profile: Profile, version_at: Callable[[Fix, Profile], str]) -> list[str]:
    """Each line of the lock at ``path`` (``text``: its ``fixes`` checked well formed) whose fix entry's version or
    patch hash is not the pack's, the pack being the one that holds ``profile`` (``version_at``: where a fix's
    version is set); [] when the pack does not load or a patch does not parse (nothing is then said of it)."""
    from .loader import load_pack  # only for a lock edited by hand

    fixes = json.loads(text)["fixes"]
    lines = text.splitlines()
    at = partial(_at, path, lines, _fix_spans(lines, len(fixes)))
    out = []
    try:
        pack = load_pack(profile.path.parent.parent, profile=profile.name).for_profile(profile.name)
        for n, entry in enumerate(fixes):
            fix = pack.fixes.get(entry["id"])
            if fix is not None and entry["version"] != fix.version:
                out.append(f"fix {fix.id}'s version at {at(n, None, 'version')} is {entry['version']}, "
                           f"the pack's {fix.version} ({version_at(fix, profile)})")
            if fix is not None and entry["patch_sha256"] != fix.patch_sha256:
                out.append(f"fix {fix.id}'s patch_sha256 at {at(n, None, 'patch_sha256')} is not the "
                           f"pack's ({fix.folder}: the hash of its change)")
    except FixpackError:
        return []
    return out


def _fix_spans(lines: list[str], count: int | None) -> list[tuple[int, int]]:
    """Each entry of the lock's ``"fixes"`` list as lines (0-based, first and last), as ``lock`` writes it (indent
    2: ``    {`` to ``    }``); [] when the lock is laid out otherwise or holds another count of them (None: any)."""
    start = next((n for n, ln in enumerate(lines) if ln == '  "fixes": ['), None)
    spans: list[tuple[int, int]] = []
    if start is None:
        return []
    first = None
    for n in range(start + 1, len(lines)):
        if lines[n] == "    {":
            first = n
        elif lines[n] in ("    }", "    },") and first is not None:
            spans.append((first, n))
            first = None
        elif lines[n].startswith("  ]"):
            break
    return spans if count is None or len(spans) == count else []


def _at(path: Path, lines: list[str], spans: list[tuple[int, int]], n: int, file: str | None, key: str) -> str:
    """``path:LINE`` of ``key`` in the ``n``-th fix entry (in its files' entry of ``file`` when given), else
    ``path`` alone (the lock's layout is not ``lock``'s)."""
    line = _line(lines, spans, n, file, key)
    return f"{path}:{line}" if line else str(path)


def _line(lines: list[str], spans: list[tuple[int, int]], n: int, file: str | None, key: str) -> int | None:
    """The 1-based line of ``key`` in the ``n``-th fix entry (in its files' entry of ``file`` when given); None when
    the lock's layout is not ``lock``'s."""
    if not spans:
        return None
    first, last = spans[n]
    if file is not None:  # (a file's entry: "path", "post", "pre", in this order)
        first = next((m for m in range(first, last) if lines[m].strip().rstrip(",") == f'"path": {json.dumps(file)}'),
                     last)
    return next((m + 1 for m in range(first, last) if lines[m].strip().startswith(f'"{key}": ')), None)


def post_edited(path: Path, entries: int, n: int, fix_id: str, file: str, want: str | None, made: str | None,
                hint: str) -> StaleLockError:
    """The error for the lock at ``path`` (``entries`` fix entries) whose ``n``-th entry, fix ``fix_id``'s, records
    ``want`` as the post-image of ``file`` where the fix's patch makes ``made`` (None: no file) of the pre-image the
    entry records: at the line of that ``"post"`` (none when the lock on disk is laid out otherwise), with ``hint``
    (how to regenerate it)."""
    return _edited(path, entries, n, file, "post", f"fix {fix_id}'s post-image of {file} is {told(want, made)}, but "
                   f"its patch makes {told(made, want)} of the pre-image the lock records for it", hint)


def pre_edited(path: Path, entries: int, n: int, fix_id: str, file: str, want: str | None, found: str | None,
               hint: str) -> StaleLockError:
    """The error for the lock at ``path`` (``entries`` fix entries) whose ``n``-th entry, fix ``fix_id``'s, records
    ``want`` as the pre-image of ``file`` where the file is ``found`` (None: no file) and the fix's patch makes of it
    the post-image the entry records: laid at its stated lines, a patch makes that post-image of one pre-image only,
    so the lock's is wrong (the file is no drift). At the line of that ``"pre"``, with ``hint``."""
    return _edited(path, entries, n, file, "pre", f"fix {fix_id}'s pre-image of {file} is {told(want, found)}, but "
                   f"the file is {told(found, want)}, of which its patch makes the very post-image the lock records",
                   hint)


def _edited(path: Path, entries: int, n: int, file: str, side: str, said: str, hint: str) -> StaleLockError:
    """StaleLockError at the line of the ``n``-th entry's ``side`` ("pre" or "post") of ``file`` in the lock at
    ``path``: ``said``, then that the lock was edited by hand and sealed again."""
    from .documents import text_for_lines  # only for a lock edited so

    lines = text_for_lines(path).splitlines()
    line = _line(lines, _fix_spans(lines, entries), n, file, side)
    what = (f"{said}: the lock was edited by hand and sealed again (its \"digest\" is a plain sha256 anyone can "
            f"recompute), so nothing was written")
    return StaleLockError(f"{path}{f':{line}' if line else ''}: {what}; {hint}", line, what, hint)


def chain_broken(path: Path, lock: Lock) -> list[tuple[str, str]]:
    """Each fix entry of ``lock`` (at ``path``, sealed) whose pre-image of a file is not the post-image the entry before
    it that touches that file (of its target) records, as ``(fix id, what)``, both lines said: a lock has them equal
    (:func:`unsealed` says so of a lock whose seal is broken; one sealed again is told here, where the patches are
    held to it), so one of the two was edited."""
    last: dict[tuple[str, str], tuple[int, str, str | None]] = {}
    broken: list[tuple[int, int, str, str, str]] = []  # (entry before, entry, the one before's id, the id, file)
    for n, fix in enumerate(lock.fixes):
        for f in fix.files:
            key = (fix.target, f.path)
            if key in last and last[key][2] != f.pre:
                broken.append((last[key][0], n, last[key][1], fix.id, f.path))
            last[key] = (n, fix.id, f.post)
    if not broken:
        return []
    from .documents import text_for_lines  # only for a lock edited so

    lines = text_for_lines(path).splitlines()
    line = partial(_line, lines, _fix_spans(lines, len(lock.fixes)))
    out = []
    for m, n, was, fid, file in broken:
        pre, post = line(n, file, "pre"), line(m, file, "post")
        out.append((fid, f"its pre-image of {file}{f' (line {pre} of the lock)' if pre else ''} and fix {was}'s "
                         f"post-image of it{f' (line {post})' if post else ''} differ, where a lock has them equal: "
                         f"one of the two was edited by hand and the lock sealed again"))
    return out


Sides = tuple[str, int, str, str]  # a hunk as a lock records it: its file, its number there, its pre- and post-image


def patch_hunks(fix: Fix) -> list[Sides]:
    """Each hunk of ``fix``'s patches (parsed), in order, as a lock records it (:class:`~fixpack.records.LockHunk`)."""
    return [(fp.path, i + 1, h.sha_pre(), h.sha_post()) for fp in fix.file_patches() for i, h in enumerate(fp.hunks)]


def sides_of(entry: LockFix) -> list[Sides]:
    """The hunks a lock's fix entry records, as :func:`patch_hunks` gives a patch's."""
    return [(h.file, h.hunk, h.pre, h.post) for h in entry.hunks]


def hunks_edited(path: Path, entry: LockFix, made: list[Sides]) -> list[str]:
    """What of the hunks a fix entry of the lock at ``path`` records (``entry``, the first of its id) is not what its
    fix's patch gives (``made``: :func:`patch_hunks`, or a lock made now): a hunk's file, number or
    sha256 of a side, each said at its line in the lock (none when it is laid out otherwise). A fix whose change
    fingerprint is the lock's has these hunks: another one there was edited by hand and sealed again. [] when
    they match."""
    have = sides_of(entry)
    if have == made:
        return []
    from .documents import text_for_lines  # only for a lock edited so

    lines = text_for_lines(path).splitlines()
    span = _span(lines, entry.id)
    edited = "the lock was edited by hand and sealed again"
    if len(have) != len(made):
        return _twice(lines, span, have, made, edited) or \
            [f"it records {len(have)} hunk(s) where its patch has {len(made)}: {edited}"]
    out = []
    keys = ("file", "hunk", "pre", "post")
    for k, (ours, theirs) in enumerate(zip(have, made)):
        i = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        if i is None:
            continue
        line = _hunk_line(lines, span, k, keys[i])
        a, b = ours[i], theirs[i]
        said = (f"its {keys[i]}-image as {told(str(a), str(b))} where its patch gives {told(str(b), str(a))}"
                if i > 1 else f"{keys[i]} {a} where its patch gives {b}")
        at = f" (line {line} of the lock)" if line else ""
        out.append(f"its hunk #{theirs[1]} of {theirs[0]}{at} records {said}: {edited}")
    return out


def _twice(lines: list[str], span: tuple[int, int] | None, have: list[Sides], made: list[Sides], edited: str
           ) -> list[str]:
    """A fix entry's hunks (``have``; its lines ``span`` of the lock's ``lines``) that are its patch's (``made``) with
    some given again, each hunk entry the same as one before it: each such entry at its line. [] when they are not
    that (a hunk's file and number may come twice, from two patches of the fix: then so does the patch's)."""
    again = [k for k, h in enumerate(have) if h in have[:k]]
    if [h for k, h in enumerate(have) if k not in again] != made:
        return []
    out = []
    for k in again:
        item = _item_span(lines, span, "hunks", k)
        at = f" (line {item[0] + 1} of the lock)" if item else ""
        out.append(f"its hunk #{have[k][1]} of {have[k][0]} is listed twice: its hunk entry {k + 1}{at} is entry "
                   f"{have.index(have[k]) + 1} again, and `fixpack lock` records each hunk of a patch once: {edited}")
    return out


def change_said(fix: Fix, entry: LockFix, profile: Profile, version_at: Callable[[Fix, Profile], str]) -> str:
    """Why a lock entry's change fingerprint or version is not ``fix``'s (for ``profile``; ``version_at``: where its
    version is set, ``lockfile.version_at``, which imports this module): at the same version over
    the very patch bytes the entry records, the lock was edited (its ``patch_sha256``, or its ``patch_bytes_sha256`` set
    to a patch edited under the same version, which then needs a new version) and sealed again; else the patch or
    version changed."""
    if entry.version == fix.version and entry.patch_bytes_sha256 == fix.bytes_sha256:
        return ("its change fingerprint (patch_sha256) is not its patch's, whose bytes are the very ones the lock "
                "records (patch_bytes_sha256): the lock was edited by hand and sealed again (its patch_sha256; or "
                f"its patch_bytes_sha256, set to a patch edited under the same version {fix.version}: if that edit is "
                f"meant, bump version in {version_at(fix, profile)} before locking, else put the patch back as it was "
                "locked)")
    return f"patch or version changed since the lock was generated{unseen_edit_said(fix)}"


def unseen_edit_said(fix: Fix) -> str:
    """The first edit of a patch of ``fix`` that an editor does not show, where the lock calls its patch changed
    (``; FILE:LINE ...``): a hunk with lines ending in CRLF beside lines ending in LF (the odd line named; a file with
    CRLF line ends gives a patch whose hunks are CRLF throughout), or a hunk line that is no UTF-8 (a byte an editor
    wrote, or a file that is not UTF-8 itself). "" where there is none, or a patch cannot be read again."""
    for patch in fix.patches:
        try:
            lines = patch.path.read_bytes().split(b"\n")
        except OSError:
            continue
        hunk: list[int] = []  # the current hunk's line numbers (1-based)
        for n, line in enumerate(lines + [b"@@"], start=1):
            if (hunk or (n > 1 and lines[n - 2].startswith(b"@@"))) and line[:1] in (b" ", b"+", b"-", b"\\"):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return (f"; {patch.path}:{n} is no UTF-8 (byte {line[exc.start]:#04x} at column {exc.start + 1}): "
                            f"if the file it was written against has no such byte, give the patch back its text")
                hunk += [n] if line[:1] != b"\\" else []  # ("\ No newline at end of file": no line of the file)
                continue
            crlf = [i for i in hunk if lines[i - 1].endswith(b"\r")]
            if crlf and len(crlf) < len(hunk):  # the fewer named: the odd ones out
                lf = [i for i in hunk if i not in crlf]
                odd, ends, other = (crlf, "CRLF", "LF") if len(crlf) <= len(lf) else (lf, "LF", "CRLF")
                return (f"; {patch.path}:{odd[0]} ends in {ends} where other lines of its hunk end in {other}: if an "
                        f"editor did that, give the patch back its line ends")
            hunk = []
    return ""


def record_edited(path: Path, entry: LockFix, fix: Fix, parsed: bool) -> list[str]:
    """What of the lock's record of ``fix`` (``entry``, its first entry in the lock at ``path``) is not what the pack
    gives, as ``lock --check`` would find it, as far as that needs no release copy: its target (``fix.toml``'s, no
    parse needed), and, where its patches are parsed (``parsed``: a run parses them anyway), the files they touch and
    their hunks (:func:`hunks_edited`), each at its line in the lock. A record whose change fingerprint is the pack's
    has these: another one there was edited by hand and the lock sealed again (its seal is a plain sha256). []
    when they match."""
    out = [target_edited(path, entry, fix)] if entry.target != fix.target else []
    if not parsed:
        return out
    have, made = [f.path for f in entry.files], list(fix.touched_paths())
    if have != made:
        order = " (the same files, in another order)" if sorted(have) == sorted(made) else ""
        out.append(f"it records {_paths(have)}{_said_at(path, entry.id, 'files')} where its patch touches "
                   f"{_paths(made).split(' ', 1)[-1]}{order}: the lock was edited by hand and sealed again")
    return out + hunks_edited(path, entry, patch_hunks(fix))


def target_edited(path: Path, entry: LockFix, fix: Fix) -> str:
    """The lock's record of ``fix`` (``entry``, its first entry in the lock at ``path``) names another target than
    its fix.toml: said at both lines (``check``, ``status``, ``apply`` and ``lock --check`` say it so)."""
    from .documents import key_line, text_for_lines  # only for a lock that differs so

    toml = fix.folder / "fix.toml"
    line = key_line(text_for_lines(toml), "target")
    return (f"its target{_said_at(path, entry.id, 'target')} is {json.dumps(entry.target)}, where "
            f"{toml}{f':{line}' if line else ''} says {json.dumps(fix.target)}: the lock was edited by hand and "
            f"sealed again, or the fix's target changed since the lock was made")


def _paths(paths: list[str]) -> str:
    """``file X`` or ``files X, Y`` (five at most), or ``no file``."""
    if not paths:
        return "no file"
    return f"file{'s' * (len(paths) > 1)} {', '.join(paths[:5])}{f' and {len(paths) - 5} more' * (len(paths) > 5)}"


def _said_at(path: Path, fix_id: str, key: str) -> str:
    """`` (line N of the lock)``: the line of ``key`` in the first entry of ``fix_id`` in the lock at ``path``; ""
    when the lock is laid out otherwise than ``lock`` writes it."""
    from .documents import text_for_lines  # only for a lock that differs

    lines = text_for_lines(path).splitlines()
    span = _span(lines, fix_id)
    line = _line(lines, [span], 0, None, key) if span is not None else None
    return f" (line {line} of the lock)" if line else ""


def _span(lines: list[str], fix_id: str) -> tuple[int, int] | None:
    """The lines of the first fix entry of ``fix_id`` in a lock (``lines``; :func:`_fix_spans`; lock.fix gives the
    first); None when the lock is laid out otherwise than ``lock`` writes it."""
    mark = f'      "id": {json.dumps(fix_id)},'
    return next(((a, b) for a, b in _fix_spans(lines, None) if mark in lines[a:b]), None)


def counts_edited(path: Path, entry: LockFix, counted: dict[int, tuple[int, int]]) -> list[str]:
    """Each hunk whose counts the lock at ``path`` records (``entry``: its ``pre_count`` and ``post_count``, how often
    its sides occur in the file it was locked on) are not ``counted``, the counts on that very file (every file the
    fix reads is the lock's pre-image: what ``lock`` counts is there), at its line in the lock. A lock records
    what lock counts: one that differs was edited by hand and sealed again. [] when they match (or are not recorded:
    a lock made before counts were kept)."""
    out: list[str] = []
    lines: list[str] | None = None
    for k, h in enumerate(entry.hunks):
        now = counted.get(k)
        if h.pre_count is None or now is None or (h.pre_count, h.post_count) == now:
            continue
        if lines is None:
            from .documents import text_for_lines  # only for a lock edited so

            lines = text_for_lines(path).splitlines()
        key, ours, theirs = ("pre_count", h.pre_count, now[0]) if h.pre_count != now[0] else \
            ("post_count", h.post_count, now[1])
        line = _hunk_line(lines, _span(lines, entry.id), k, key)
        side = "pre-image in the file" if key == "pre_count" else "post-image in the file it makes"
        out.append(f"its hunk #{h.hunk} of {h.file}{f' (line {line} of the lock)' if line else ''} records {key} "
                   f"{ours} where its {side} occurs {theirs} time(s), and that file is byte for byte the one it was "
                   f"locked on: the lock was edited by hand and sealed again")
    return out


def _hunk_line(lines: list[str], span: tuple[int, int] | None, k: int, key: str) -> int | None:
    """The 1-based line of ``key`` in the ``k``-th hunk entry of a fix entry (``span``: its lines), looked for in that
    entry alone; None when the lock's layout is not ``lock``'s or the entry has no such key."""
    item = _item_span(lines, span, "hunks", k)
    if item is None:
        return None
    return next((m + 1 for m in range(item[0], item[1] + 1) if lines[m].strip().startswith(f'"{key}": ')), None)


def told(digest: str | None, other: str | None) -> str:
    """A file's sha256 as a message says it beside ``other``: up to the first character that differs, 12 at least
    ("no file" for None)."""
    if digest is None:
        return "no file"
    differ = next((i for i, (a, b) in enumerate(zip(digest, other or "")) if a != b), 0)
    return f"sha256 {digest[:max(12, differ + 1)]}"


def seal_broken(exc: StaleLockError, raw: bytes, path: Path, profile: Profile,
                version_at: Callable[[Fix, Profile], str]) -> StaleLockError:
    """``exc`` (a lock of ``profile`` at ``path``, ``raw``, refused as it was read), with the lines where it is not
    what the pack says (:func:`against_pack`) when it is refused for its seal; else ``exc`` as it is."""
    if not exc.what.startswith(SEAL_SAID):
        return exc
    differ = against_pack(raw.decode("utf-8"), path, profile, version_at)
    if not differ:
        return exc
    what = f"{exc.what}; where it is not what the pack says: {'; '.join(differ)}"
    return StaleLockError(f"{path}{f':{exc.line}' if exc.line else ''}: {what}; {exc.hint}", exc.line, what, exc.hint)
