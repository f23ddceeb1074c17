"""The one place the engine parses JSON and TOML text (the state's manifest and journal, locks, SBOMs, a
rebase's files, profiles, ``fix.toml``): a document nested deeper than the parser can follow (Python's
recursion limit) is refused as one more malformed document, a :class:`json.JSONDecodeError` or
``tomllib.TOMLDecodeError`` that each caller's handler already turns into its file's error (exit 2 for the
pack, 3 for the state), with the line where the nesting gets too deep; never a RecursionError (exit 1).
So is an integer longer than Python converts (``sys.get_int_max_str_digits()``, 4300 digits): the parser's
ValueError, caught around the parse alone, is that file's malformed-document error, with its line.
And the reading of the pack's own text files (profiles, ``fix.toml``, ``variant.toml``, ``fixes/series``, a
profile's lock): something there that is no regular file is named, unread, and a symbolic link too; so is one
larger than ``MAX_PACK_TEXT_BYTES``: a 300 MB series took 4.9 GB of memory (a fix's patch file: ``MAX_PATCH_BYTES``).
:func:`read_capped` is that capped read, for
every JSON or TOML document the tool reads back (a lock: that cap; the state's manifest and journal, a rebase's
``state.json`` and ``<name>.undo.json``, an edit's state: ``MAX_STATE_BYTES``; an SBOM: ``MAX_SBOM_BYTES``; the
small records the tool writes beside its output, an export's ``.fixpack-export`` and a release copy's
``.fixpack-complete``, and a ``direct_url.json`` pip writes: ``MAX_PACK_TEXT_BYTES``, as they are a few hundred
bytes)."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (some Gaudi images): the same parser as a package
    import tomli as tomllib  # type: ignore[no-redef]

from . import __version__
from .errors import BadInputError, Collector, DamagedStateError, EnvironmentProblem, raise_unreadable
from .safepath import TooLargeError, folder_link, link_to, not_a_file, not_a_pack_file, read_regular

__all__ = ["TooLargeError"]  # (read_capped's error, for its callers)

TOO_DEEP = "nested too deeply to read"
_DIGITS = re.compile(r"[0-9_]+")
MAX_PACK_TEXT_BYTES = 4 << 20  # a series, profile, fix.toml or lock larger than this is no pack's (they are KBs)
MAX_STATE_BYTES = 64 << 20  # a state file (manifest, journal, a rebase's or an edit's) larger: not one this tool wrote
# An SBOM (``verify --sbom``, the ``--out`` a re-run compares with): the user's, maybe another tool's. Ours carries
# each applied fix's patch text and a sha256 per patched or installed file (KBs to a few MB); a whole-image SBOM of
# a scanner (every package, every file's hash) runs to tens of MB. 64 MiB holds those, while parsing and checking
# one against the CycloneDX schema (several times its size in memory) stays well under a GB.
MAX_SBOM_BYTES = 64 << 20
# A fix's patch file: text patches are KBs (the largest of the pack's fixes: 7 KB); one carrying GIT binary patch data
# (base85, deflated) runs to a few MB. Past 64 MiB it is refused unread, as its bytes are held, hashed and parsed.
MAX_PATCH_BYTES = 64 << 20
_NAMED_AT = 100  # the depth the error's line is taken at: past any document this tool writes or reads


class TooDeepTomlError(tomllib.TOMLDecodeError):
    """A TOML document nested too deeply, or with an integer too long to read; its message names the line and
    column, as tomllib's own do."""

    def __init__(self, msg: str) -> None:
        ValueError.__init__(self, msg)  # (TOMLDecodeError's own signature differs between versions)


class _Twice(ValueError):
    """A key an object of the document holds twice (its first argument)."""


def _one_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        keys = [k for k, _v in pairs]
        raise _Twice(next(k for k in keys if keys.count(k) > 1))
    return out


def read_state_file(path: Path) -> bytes | None:
    """The bytes of a state file, None when it does not exist; never through a link (``O_NOFOLLOW``: a link put
    there since the lstat is refused too), and no further than ``MAX_STATE_BYTES``: told by its size, and at most
    that many bytes and one read should it grow after the size was told (:func:`fixpack.safepath.read_regular`)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise DamagedStateError(path, f"it is a symbolic link (to {link_to(path)}); state is never read "
                                      f"through a link")
    if not stat.S_ISREG(st.st_mode):
        raise DamagedStateError(path, "it is not a regular file")
    try:
        return read_regular(path, MAX_STATE_BYTES, follow=False)
    except TooLargeError as exc:
        raise DamagedStateError(path, f"{exc.size} bytes, more than any state this tool writes") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EINVAL):  # a link or a FIFO put there since the lstat
            raise DamagedStateError(path, "it is a symbolic link or not a regular file; state is never read "
                                          "through a link") from None
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror}); run as a user who may read the "
                                 f"target") from exc


def loads_json(text: str | bytes) -> Any:
    """``json.loads``, with a document nested too deeply, or an object holding a key twice (json.loads kept the last
    one without a word: a lock or manifest edited by hand said one thing to its reader and another to a person), a
    :class:`json.JSONDecodeError` (a ValueError)."""
    try:
        return json.loads(text, object_pairs_hook=_one_each)
    except _Twice as exc:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(f"the key {json.dumps(exc.args[0])} appears twice in one object (a reader keeps "
                                   f"only one of them)", doc, _second_key_at(doc)) from None
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(TOO_DEEP, doc, too_deep_at(doc, toml=False)) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # (only the int conversion of a number past the digit limit raises another ValueError)
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(too_long(), doc, too_long_at(doc)) from None


def _second_key_at(doc: str) -> int:
    """The offset in ``doc`` (valid JSON but for a key twice) of the first key an object holds a second time: that
    second place, in the object that holds it (a search for the key's text found another object's); 0 if none."""
    keys: list[set[str] | None] = []  # each open object's keys so far (None: an array)
    i = 0
    while i < len(doc):
        c = doc[i]
        if c == '"':
            end = i + 1
            while end < len(doc) and doc[end] != '"':
                end += 2 if doc[end] == "\\" else 1
            said, end = json.loads(doc[i:end + 1]), end + 1
            after = end
            while after < len(doc) and doc[after] in " \t\r\n":
                after += 1
            seen = keys[-1] if keys else None
            if seen is not None and doc[after:after + 1] == ":":
                if said in seen:
                    return i
                seen.add(said)
            i = end
            continue
        if c in "{[":
            keys.append(set() if c == "{" else None)
        elif c in "}]" and keys:
            keys.pop()
        i += 1
    return 0


def load_json(raw: bytes, path: Path) -> Any:
    """JSON from a state file's bytes; DamagedStateError (exit 3) naming ``path`` when it is not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedStateError(path, f"bytes that are not UTF-8 at byte offset {exc.start}") from exc
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        raise DamagedStateError(path, f"not valid JSON (line {exc.lineno}: {exc.msg})") from exc


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads``, with a document nested too deeply a ``TOMLDecodeError`` naming its line."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise TooDeepTomlError(f"{TOO_DEEP} ({_line_column(text, too_deep_at(text, toml=True))})") from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:  # (only the int conversion of a number past the digit limit raises another ValueError)
        raise TooDeepTomlError(f"{too_long()} ({_line_column(text, too_long_at(text))})") from None


def _line_column(text: str, at: int) -> str:
    """Offset ``at`` of ``text`` as tomllib's messages say a place: "at line L, column C" (both from 1)."""
    return f"at line {text.count(chr(10), 0, at) + 1}, column {at - text.rfind(chr(10), 0, at)}"


def too_long() -> str:
    """The words for an integer longer than Python converts (the limit is a setting of the interpreter)."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    return f"an integer of more than {limit} digits"


def too_long_at(text: str) -> int:
    """The offset in ``text`` of its longest run of digits (the integer too long to read)."""
    runs = [(m.end() - m.start(), m.start()) for m in _DIGITS.finditer(text)]
    return max(runs, key=lambda r: r[0])[1] if runs else 0


def too_deep_at(text: str, toml: bool) -> int:
    """The offset in ``text`` where arrays, objects or inline tables first nest past ``_NAMED_AT`` levels
    (else the deepest point): strings and (TOML) comments skipped, a line's best guess for a message."""
    depth = deepest = at = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote or c == "\n":
                quote = ""
        elif c == '"' or (toml and c == "'"):
            quote = c
        elif toml and c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
                if depth > _NAMED_AT:
                    return i
        elif c in "]}":
            depth -= 1
        i += 1
    return at


def read_toml(path: Path, errors: Collector, root: Path | None = None) -> tuple[dict[str, Any], str] | None:
    """A profile, ``fix.toml`` or ``variant.toml``: its data and text, or None with the problem added to
    ``errors``. Something there that is no regular file (a FIFO would block the read) is named, unread; so is
    one under a folder of the pack at ``root`` that is a symbolic link (:func:`read_pack_file`)."""
    raw = read_pack_file(path, errors, "TOML file", root=root)
    if raw is None:
        return None
    if b"\r\n" in raw:
        errors.add("CRLF line endings", path, raw.count(b"\n", 0, raw.find(b"\r\n")) + 1, "convert to LF")
    text = utf8_text(raw, path, errors)
    if text is None:
        return None
    try:
        return loads_toml(text), text
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        end = len(text.splitlines()) or 1 if "end of document" in str(exc) else None  # (tomllib names no line)
        line = int(m.group(1)) if m else end
        what, hint, line = _toml_said(exc, text, line)
        errors.add(what, path, line, hint)
        return None


_BARE_KEY = re.compile(r"\s*([A-Za-z0-9_-]+)\s*=")
_PROBES = 16  # the lines with a bare key tried for each of a clash's two, nearest first


def _toml_said(exc: tomllib.TOMLDecodeError, text: str, line: int | None) -> tuple[str, str, int | None]:
    """tomllib's words for a document it refuses, what to do, and the line; "Cannot overwrite a value" of a bare key
    given again put in ours: the key, its two lines (tomllib names where the second value ends), where giving either
    of them another name lets the document be read to there (a key of another table, a line inside a string, a dotted
    or quoted key: tomllib's words as they are). Lines are counted on newlines alone, as tomllib counts them."""
    said = (f"malformed TOML: {exc}", "fix the syntax", line)
    if not str(exc).startswith("Cannot overwrite a value") or line is None or len(text.encode()) > 65536:
        return said  # (a pack's TOML is a few KB: each candidate line costs a parse, PROBES of them at most)
    lines = text.split("\n")
    keyed = [(k, m) for k in range(min(line, len(lines)), 0, -1) if (m := _BARE_KEY.match(lines[k - 1]))]

    def reads_without(k: int, m: re.Match[str]) -> bool:  # the document to ``line``, line k's key named otherwise
        probe = lines[:line]
        probe[k - 1] = lines[k - 1][:m.start(1)] + "fixpack-probe-" + lines[k - 1][m.start(1):]
        try:
            loads_toml("\n".join(probe))
        except tomllib.TOMLDecodeError:
            return False
        return True

    second = next(((k, m) for k, m in keyed[:_PROBES] if reads_without(k, m)), None)  # nearest above tomllib's line
    if second is None:
        return said
    at, key = second[0], second[1].group(1)
    same = [(k, b) for k, b in keyed if k < at and b.group(1) == key]
    first = next((k for k, b in same[:_PROBES] if reads_without(k, b)), None)
    if first is None:
        return said
    return (f"malformed TOML: the key {key} is given again (line {first} has it already): {exc}",
            f"keep one of lines {first} and {at}", at)


def read_pack_file(path: Path, errors: Collector, kind: str, missing: tuple[str, str] | None = None,
                   root: Path | None = None) -> bytes | None:
    """The bytes of a pack file, or None with the problem added to ``errors``: something there that is no
    regular file named unread, since a FIFO would block the read, and a symbolic link, never followed (a pack's
    file is read from the pack's own folder, as a patch file is: a link could lead to any file of the machine);
    ``root``: the pack's, whose folders on the way to ``path`` must be no links either (:func:`link_refused`);
    ``missing``: the problem and hint for no file at all (else a missing file is a read that fails)."""
    check_reachable(path)
    if root is not None and link_refused(root, path, errors):
        return None
    what = not_a_pack_file(path)
    if what is not None and not_a_file(path) is None:  # a link to a regular file
        errors.add(f"is {what}: a pack's {kind} is read only from the pack's own folder, never through a link",
                   path, None, f"put the {kind} itself there")
    elif what is not None:
        errors.add(f"is {what}, not a regular file", path, None, f"put the {kind} itself there")
    elif missing is not None and not os.path.lexists(path):
        errors.add(missing[0], path, None, missing[1])
    else:
        try:
            return read_regular(path, MAX_PACK_TEXT_BYTES, follow=False)  # (a link put there since: ELOOP)
        except TooLargeError as exc:
            errors.add(exc.said(f"a pack's {kind}"), path, None,
                       f"a pack's {kind} is a few KB: put the pack's own there")
        except OSError as exc:
            raise_unreadable(path, exc)
            errors.add(f"cannot read: {exc.strerror}", path)
    return None


def check_reachable(path: Path, whose: str = "the pack") -> None:
    """Raises :func:`fixpack.errors.unreadable`'s error (exit 5) when ``path`` cannot be looked at for permissions
    (a folder on its way not searchable by this user) or the disk: a check that swallows that (``os.path.lexists``,
    ``Path.is_file``) would call the file missing, and the advice would be to create it."""
    try:
        os.lstat(path)
    except OSError as exc:
        raise_unreadable(path, exc, whose)


def link_refused(root: Path, path: Path, errors: Collector) -> bool:
    """Whether a folder on the way from the pack at ``root`` to its file ``path`` is a symbolic link
    (:func:`~fixpack.safepath.folder_link`): then that link is named in ``errors``, with where it leads and what
    to do, and the file is neither read nor written through it."""
    link = folder_link(root, path)
    if link is None:
        return False
    try:
        to = os.readlink(root / link)
    except OSError:  # (replaced since it was looked at)
        to = "elsewhere"
    errors.add(f"is a symbolic link to {to}: a pack's files are read and written only in the pack's own folder, "
               f"never through a link (its {path.relative_to(root).as_posix()} is not read)", root / link, None,
               f"put the folder itself there: rm -- {root / link}, then move the folder it leads to in its place")
    return True


def read_capped(path: Path, limit: int = MAX_PACK_TEXT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (a link followed; opened without blocking, so a FIFO is an
    OSError), or TooLargeError (a ValueError: ``exc.said(kind)`` words it) when it is larger than ``limit``,
    told by its size before anything is read: every reader of a JSON or TOML document goes through here."""
    return read_regular(path, limit)


def pack_text(path: Path, then: str) -> str:
    """A pack's text file (a profile, ``fix.toml``, ``variant.toml``, ``fixes/series``) read again after the load,
    to be rewritten: read as the load read it (:func:`read_capped`: no further than ``MAX_PACK_TEXT_BYTES``, without
    blocking, a regular file only), UTF-8. One that no longer is such a file is BadInputError naming it, what it is
    now and ``then`` (what to do), never read whole nor waited on."""
    try:
        return read_capped(path).decode("utf-8")
    except TooLargeError as exc:
        now = f"it is now {exc.said('a pack text file')}"
    except UnicodeDecodeError as exc:
        now = f"it now holds bytes that are not UTF-8, at byte offset {exc.start}"
    except OSError as exc:
        what = not_a_file(path)
        now = f"it is now {what}" if what else f"it cannot be read: {exc.strerror}"
    raise BadInputError(f"{path}: changed since the pack was loaded ({now}): {then}")


def text_for_lines(path: Path) -> str:
    """A pack's text file read again for the line a message names, as :func:`pack_text` reads it: "" (no line
    then) when it is no longer a regular UTF-8 file within the cap."""
    try:
        return read_capped(path).decode("utf-8")
    except (OSError, ValueError):  # (TooLargeError and UnicodeDecodeError are ValueErrors)
        return ""


def utf8_text(raw: bytes, path: Path, errors: Collector) -> str | None:
    """``raw`` as UTF-8 text, or None with a problem that names the line and byte offset of the first
    byte that is not UTF-8 (TOML and the series are UTF-8 by definition). A UTF-8 byte order mark is named
    as such, and the text read without it (its lines are not then reported one by one)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        errors.add("a UTF-8 byte order mark (BOM) opens the file", path, 1,
                   "remove it: save the file as UTF-8 without a BOM")
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.add(f"bytes that are not UTF-8 at byte offset {exc.start}", path, raw.count(b"\n", 0, exc.start) + 1,
                   "save the file as UTF-8")
        return None


def short(text: str, most: int = 40) -> str:
    """``text`` cut to ``most`` characters for a message (a planted value may be any length)."""
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def schema_said(value: str, kind: str, wanted: int) -> str:
    """A document of another schema (``value``, as written; ``kind`` "lock " or ""): what this fixpack reads."""
    return f"its schema is {value}; this fixpack ({__version__}) reads {kind}schema {wanted} only"


def key_line(text: str, key: str, table: str = "") -> int | None:
    """The 1-based line where ``key`` is set (or ``[table.key]`` opens; or, dotted, ``key.x = 1`` or ``[key.x]``; or
    at the top, ``table.key = ...`` or an inline ``table = { ... }``: its line) in a TOML text, if found. Quoted names
    are read as bare ones, a comment after a table's header is passed over, and so are the lines of a multi-line
    string (a ``[table]`` or ``key =`` written inside one is text)."""
    in_table, top, inside = table == "", True, ""
    for n, line in enumerate(text.splitlines(), 1):
        if inside:  # (the line that closes it is text up to the delimiter: a key after it is rare enough)
            inside = "" if inside in line else inside
            continue
        s = line.strip()
        if s.startswith("[") and not s.startswith("[["):
            name = ".".join(p.strip().strip("\"'") for p in s.split("]", 1)[0].strip("[ \t").split("."))
            full = f"{table}.{key}" if table else key
            if name in (full, key) and name.endswith(key) or name.startswith(full + "."):  # [key.sub] too
                return n
            in_table, top = table == "" or name == table or name.startswith(table + "."), False
            continue
        if in_table and re.match(rf"^\s*([\"']?){re.escape(key)}\1\s*[=.]", line):  # a dotted key (key.x = 1) too
            return n
        at_top = rf"^\s*([\"']?){re.escape(table)}\1\s*(\.\s*([\"']?){re.escape(key)}\3\s*=|=\s*\{{)"
        if table and top and re.match(at_top, line):  # table.key = ..., or table = { ... }
            return n
        inside = next((d for d in ('"""', "'''") if line.count(d) % 2), "")
    return None


def unknown_keys(data: dict[str, Any], allowed: set[str], path: Path, text: str,
                 errors: Collector, table: str = "") -> None:
    """Each key of ``data`` (a TOML table of ``path``, ``table`` its name) not in ``allowed``, added to ``errors`` at
    its line with the closest allowed key."""
    from .closenames import close_matches

    for key in sorted(set(data) - allowed):
        close = close_matches(key, sorted(allowed), 1)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(sorted(allowed))}"
        where = f"[{table}] " if table else ""
        errors.add(f"unknown key {where}{key!r}", path, key_line(text, key, table), hint)
