"""fixpack.structs behaves as the standard library's dataclasses for what the engine uses: each case
builds the same class body with both decorators and compares what the two classes do."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Any, ClassVar

import pytest
from conftest import REPO

from fixpack import structs


def both(body: Any, **options: Any) -> tuple[type, type]:
    """``body`` (a function returning a fresh class) decorated by each implementation."""
    return dataclasses.dataclass(**options)(body(dataclasses.field)), structs.dataclass(**options)(
        body(structs.field))


def plain(field: Any) -> type:
    class Hunk:
        path: str
        start: int
        lines: tuple[str, ...] = ()
        note: str = field(default="", compare=False, repr=False)
        tags: tuple[str, ...] = field(default_factory=tuple)
        kind: ClassVar[str] = "hunk"

        def size(self) -> int:
            return len(self.lines)
    return Hunk


def with_hash_false(field: Any) -> type:
    class Entry:
        path: str
        sha: str = field(default="", hash=False)
    return Entry


@pytest.mark.parametrize("frozen", [True, False])
def test_init_repr_eq_hash_as_dataclasses(frozen: bool) -> None:
    std, ours = both(plain, frozen=frozen)
    for args, kwargs in [(("a.py", 3), {}), (("a.py", 3, ("x",)), {"note": "n"}), ((), {"path": "b", "start": 1})]:
        s, o = std(*args, **kwargs), ours(*args, **kwargs)
        assert repr(s) == repr(o)
        assert [getattr(s, n) for n in ("path", "start", "lines", "note", "tags")] == \
               [getattr(o, n) for n in ("path", "start", "lines", "note", "tags")]
        assert o == ours(*args, **kwargs) and (s == std(*args, **kwargs))
        assert o.size() == s.size() and ours.kind == std.kind == "hunk"
        if frozen:
            assert hash(o) == hash(ours(*args, **kwargs))
        else:
            assert ours.__hash__ is None and std.__hash__ is None
    assert ours("a", 1, note="x") == ours("a", 1, note="y")  # compare=False: not compared, as dataclasses
    assert std("a", 1, note="x") == std("a", 1, note="y")
    assert ours("a", 1) != ours("a", 2) and ours("a", 1) != ("a", 1)
    assert ours("a", 1).tags == () and std("a", 1).tags == ()
    assert [f.name for f in structs.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    assert ours.__match_args__ == std.__match_args__
    assert ours.lines == std.lines == () and not hasattr(ours, "tags") and not hasattr(std, "tags")


def test_frozen_refuses_assignment_and_deletion() -> None:
    _, ours = both(plain, frozen=True)
    o = ours("a", 1)
    with pytest.raises(structs.FrozenInstanceError):
        o.path = "b"
    with pytest.raises(AttributeError):
        del o.start
    assert o.path == "a"


def test_hash_false_field_leaves_the_hash() -> None:
    std, ours = both(with_hash_false, frozen=True)
    assert hash(ours("p", "1")) == hash(ours("p", "2"))
    assert hash(std("p", "1")) == hash(std("p", "2"))
    assert ours("p", "1") != ours("p", "2")


def test_replace_and_inheritance() -> None:
    _, ours = both(plain, frozen=True)
    o = ours("a", 1, ("x",))
    r = structs.replace(o, start=5)
    assert (r.path, r.start, r.lines) == ("a", 5, ("x",)) and o.start == 1
    with pytest.raises(TypeError):
        structs.replace(o, nope=1)

    @structs.dataclass(frozen=True)
    class Wider(ours):  # type: ignore[misc, valid-type]
        extra: int = 0
    w = Wider("a", 1, extra=2)
    assert [f.name for f in structs.fields(w)] == ["path", "start", "lines", "note", "tags", "extra"]
    assert repr(w).startswith("test_replace_and_inheritance.<locals>.Wider(path='a'")


def test_refused_as_dataclasses_refuses() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b'"):
        @structs.dataclass
        class Bad:
            a: int = 0
            b: int
    with pytest.raises(ValueError):
        structs.field(default=1, default_factory=list)
    with pytest.raises(TypeError, match="__post_init__"):
        @structs.dataclass
        class Post:
            a: int

            def __post_init__(self) -> None:
                pass


def test_explicit_methods_are_kept() -> None:
    @structs.dataclass
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __hash__(self) -> int:
            return 7
    assert repr(Own(1)) == "own" and hash(Own(1)) == 7 and Own(1) == Own(1)


def test_the_image_path_imports_neither_dataclasses_nor_inspect() -> None:
    """What an apply_all.py run imports before its engine starts: none of the standard library's costly
    helpers (dataclasses brings inspect, ast, dis and tokenize: half of the import time, issue #13)."""
    code = ("import sys; import fixpack.cli_fast, fixpack.engine, fixpack.evaluate, fixpack.applier, fixpack.diff;"
            "print(' '.join(sorted(m for m in ('dataclasses', 'inspect', 'ast', 'shutil', 'email') if m in sys.modules)))")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""


@pytest.mark.parametrize("default", [[], {}, set()])
def test_a_mutable_default_is_refused_as_dataclasses_refuses_it(default: Any) -> None:
    """One list shared by every record made without the argument: dataclasses refuses it, so must we."""
    def body(field: Any) -> type:
        class Shared:
            items: Any = field(default=default) if default == {} else default
        return Shared
    with pytest.raises(ValueError, match="mutable default"):
        dataclasses.dataclass(body(dataclasses.field))
    with pytest.raises(ValueError, match="mutable default .* for field items is not allowed: use default_factory"):
        structs.dataclass(body(structs.field))


def test_annotations_kept_lazily_are_refused_not_read_as_no_fields() -> None:
    """Python 3.14 keeps a class's annotations in ``__annotate__`` unless the module has ``from __future__
    import annotations``: read from ``__dict__`` they would be none, and a record with defaults only would
    silently compare and hash as empty."""
    lazy = type("Lazy", (), {"__annotate__": lambda fmt: {"a": int}, "a": 0, "__module__": __name__})
    with pytest.raises(TypeError, match="from __future__ import annotations"):
        structs.dataclass(lazy)


@pytest.mark.parametrize("base_frozen", [True, False])
def test_frozen_and_non_frozen_records_do_not_mix_as_dataclasses(base_frozen: bool) -> None:
    """A non-frozen record on a frozen base could not even be built (its __init__ assigns); the other way
    round the base's fields could be assigned through the frozen one. dataclasses refuses both."""
    for make, deco in ((dataclasses.dataclass, dataclasses.dataclass), (structs.dataclass, structs.dataclass)):
        @make(frozen=base_frozen)
        class Base:
            a: int = 0
        with pytest.raises(TypeError, match="cannot inherit"):
            @deco(frozen=not base_frozen)
            class Child(Base):
                b: int = 0
