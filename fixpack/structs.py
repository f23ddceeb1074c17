"""The engine's record classes: ``dataclass``, ``field``, ``replace`` and ``fields`` with the standard
library's meaning for the part of it the engine uses, built for a short-lived process.

Why not :mod:`dataclasses` itself: an image's ``apply_all.py`` runs for tens of milliseconds, and the
standard library's decorator compiles five to six generated functions per frozen class (``exec`` each) and
imports :mod:`inspect` (with ``ast``, ``dis`` and ``tokenize``) to write a docstring: for the ~30 classes an
apply loads that was about half of the import time (issue #13; ``python -X importtime``). Here each class
compiles one function (its ``__init__``, so that building a record costs what a dataclass's does), and
``__repr__``, ``__eq__`` and ``__hash__`` are shared functions over :func:`operator.attrgetter`.

What is kept from :mod:`dataclasses` (tests/test_structs.py checks each against it on the same class
bodies): fields from the class's annotations in order, after those of a record base; a default as the
class attribute; ``field(default=, default_factory=, repr=, compare=, hash=)``; a field without a default
after one with a default is a ``TypeError``, and so is a frozen record based on a non-frozen one or the
other way round; a mutable (unhashable) default is a ``ValueError``;
``ClassVar`` annotations are not fields; methods the class body defines itself are kept; ``frozen=True``
makes assignment raise :class:`FrozenInstanceError` (an ``AttributeError``) and, with ``eq``, gives a
``__hash__`` over the compared fields; ``eq`` without ``frozen`` leaves the class unhashable unless its
body defines ``__hash__``; ``__match_args__``. A record's module needs ``from __future__ import
annotations``: the fields are read from the class's ``__annotations__``, which Python 3.14 otherwise
keeps lazily (refused, not read as no fields).
Not supported (not used by the engine): ``order``, ``slots``, ``kw_only``, ``InitVar``, ``__post_init__``
(refused at class creation, not silently ignored), ``asdict``.

Type checkers read the standard library's declarations (``TYPE_CHECKING`` below), so a record is typed as
the dataclass it behaves as.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

T = TypeVar("T")
_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()
_UNSUPPORTED = ("__post_init__", "__slots__")


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record (as :class:`dataclasses.FrozenInstanceError`)."""


class Field:
    """One field: its name, default or default factory, and whether repr, eq and hash use it."""

    __slots__ = ("name", "default", "default_factory", "repr", "compare", "hash")

    def __init__(self, default: Any, default_factory: Any, repr: bool, compare: bool, hash: bool | None) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default, self.default_factory = default, default_factory
        self.repr, self.compare, self.hash = repr, compare, hash

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def _field(*, default: Any = _MISSING, default_factory: Any = _MISSING, repr: bool = True, compare: bool = True,
           hash: bool | None = None) -> Any:
    """A field's options, as :func:`dataclasses.field` (the value stands in the class body as its default)."""
    return Field(default, default_factory, repr, compare, hash)


def _fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a record class or instance, in ``__init__`` order; TypeError for anything else."""
    try:
        return obj.__record_fields__  # type: ignore[no-any-return]
    except AttributeError:
        raise TypeError("must be called with a record class or instance") from None


def _replace(obj: T, /, **changes: Any) -> T:
    """A new record like ``obj`` with ``changes`` (field name -> value), as :func:`dataclasses.replace`."""
    for f in _fields(obj):
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def _own_fields(cls: type) -> list[Field]:
    found = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(value, _MISSING, True, True, None)
        f.name = name
        if f.default is not _MISSING and f.default.__class__.__hash__ is None:  # as dataclasses: shared by every record
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        if isinstance(value, Field):
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        found.append(f)
    return found


def _init_source(cls: type, fields: list[Field], frozen: bool) -> tuple[str, dict[str, Any]]:
    """The source of ``__init__`` and its globals (defaults and factories by name)."""
    scope: dict[str, Any] = {"_MISSING": _MISSING, "_set": object.__setattr__}
    params, body = ["self"], []
    seen_default = False
    for f in fields:
        if f.default is not _MISSING:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
            value = f.name
        elif f.default_factory is not _MISSING:
            scope[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            value = f"_f_{f.name}() if {f.name} is _MISSING else {f.name}"
        else:
            if seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument in {cls.__qualname__}")
            params.append(f.name)
            value = f.name
        seen_default = seen_default or f.default is not _MISSING or f.default_factory is not _MISSING
        body.append(f"_set(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    lines = [f"def __init__({', '.join(params)}):", *(f"    {line}" for line in body or ["pass"])]
    return "\n".join(lines) + "\n", scope


def _compare_key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda obj: ()
    get = attrgetter(*names)
    return get if len(names) > 1 else (lambda obj: (get(obj),))


def _make_eq(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _make_hash(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))
    return __hash__


def _make_repr(names: list[str]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _frozen_methods(cls: type, names: set[str]) -> tuple[Callable[..., None], Callable[..., None]]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]
    return __setattr__, __delattr__


def _set_new(cls: type, name: str, value: Any) -> None:
    if name not in cls.__dict__:
        setattr(cls, name, value)


def _process(cls: type, frozen: bool, eq: bool) -> type:
    for name in _UNSUPPORTED:
        if name in cls.__dict__:
            raise TypeError(f"{cls.__qualname__}: {name} is not supported by fixpack.structs")
    if "__annotate__" in cls.__dict__ and "__annotations__" not in cls.__dict__:  # Python 3.14's lazy annotations
        raise TypeError(f"{cls.__qualname__}: its fields are read from __annotations__; its module "
                        f"({cls.__module__}) needs `from __future__ import annotations`")
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        if "__record_fields__" in base.__dict__ and base.__dict__["__record_frozen__"] != frozen:
            raise TypeError(f"cannot inherit {'' if frozen else 'non-'}frozen record {cls.__qualname__} from a "
                            f"{'non-' if frozen else ''}frozen one ({base.__qualname__}), as dataclasses")
        for f in base.__dict__.get("__record_fields__", ()):
            inherited[f.name] = f
    for f in _own_fields(cls):
        inherited[f.name] = f
    fields = list(inherited.values())
    source, scope = _init_source(cls, fields, frozen)
    exec(source, scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    _set_new(cls, "__init__", init)
    cls.__record_fields__ = tuple(fields)  # type: ignore[attr-defined]
    cls.__record_frozen__ = frozen  # type: ignore[attr-defined]
    _set_new(cls, "__match_args__", tuple(f.name for f in fields))
    _set_new(cls, "__repr__", _make_repr([f.name for f in fields if f.repr]))
    explicit_hash = "__hash__" in cls.__dict__ and not (cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__)
    if eq:
        _set_new(cls, "__eq__", _make_eq(_compare_key([f.name for f in fields if f.compare])))
        if frozen and not explicit_hash:
            cls.__hash__ = _make_hash(_compare_key(  # type: ignore[method-assign, assignment]
                [f.name for f in fields if (f.compare if f.hash is None else f.hash)]))
        elif not explicit_hash:
            cls.__hash__ = None  # type: ignore[assignment]
    if frozen:
        setter, deleter = _frozen_methods(cls, {f.name for f in fields})
        for name, method in (("__setattr__", setter), ("__delattr__", deleter)):
            if name in cls.__dict__:
                raise TypeError(f"cannot overwrite attribute {name} in frozen class {cls.__qualname__}")
            setattr(cls, name, method)
    return cls


def _dataclass(cls: type | None = None, /, *, frozen: bool = False, eq: bool = True) -> Any:
    """Make ``cls`` a record class (used as ``@dataclass`` or ``@dataclass(frozen=True)``)."""
    if cls is None:
        return lambda c: _process(c, frozen, eq)
    return _process(cls, frozen, eq)


if TYPE_CHECKING:  # the checker sees the standard library's declarations: a record types as a dataclass
    from dataclasses import dataclass, field, fields, replace
else:
    dataclass, field, fields, replace = _dataclass, _field, _fields, _replace

__all__ = ["Field", "FrozenInstanceError", "dataclass", "field", "fields", "replace"]
