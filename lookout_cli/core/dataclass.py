"""The standard library's ``dataclass``, made for a program that starts on every prompt.

A dataclass compiles its ``__init__``, ``__repr__`` and ``__eq__`` (a frozen one also its
``__setattr__``, ``__delattr__`` and ``__hash__``) from generated source as its module is
imported, and reads each field's annotation with a regular expression: the 32 classes a
prompt's re-measure imports cost 12 ms of its 0.12 s. Ours is a real dataclass
(``dataclasses.fields``, ``replace``, ``asdict`` and orjson read it as one: its fields are the
standard ``Field`` objects) whose fields are read off the class body as written, whose ``__init__``
is compiled from a few short lines the first time the class is called (most classes a run
imports it never makes), and whose other methods are shared, read off the fields at call
time (as a field's ``repr``, ``compare`` and ``hash`` say). The same options as the standard
one: ``frozen``, ``slots``, ``eq``, ``repr``; what a class body defines itself is kept. A
field left out of ``__init__`` or keyword-only is refused: the ``__init__`` made here takes
every field in order."""

from __future__ import annotations

import dataclasses
import reprlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any


class _Factory:
    """An argument left to its field's default_factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def dataclass(cls: type | None = None, /, *, frozen: bool = False, slots: bool = False, eq: bool = True,
              repr: bool = True) -> Any:
    """``@dataclass`` or ``@dataclass(frozen=..., slots=..., eq=..., repr=...)`` on a class, as
    the standard library's."""

    def wrap(cls: type) -> type:
        own = dict(cls.__dict__)
        fields = _fields(cls, own)
        names = tuple(fields)
        odd = [f.name for f in fields.values() if not f.init or f.kw_only is True]
        if odd:
            raise TypeError(f"{cls.__qualname__}: lookout's dataclass takes every field in __init__, in order, "
                            f"not {', '.join(odd)}")
        if slots:
            cls = _slotted(cls, own, names)
        cls.__dataclass_fields__ = fields
        cls.__dataclass_params__ = _params(frozen, eq, repr, slots)
        cls._shown = tuple(f.name for f in fields.values() if f.repr)
        cls._compared = tuple(f.name for f in fields.values() if f.compare)
        cls._hashed = tuple(f.name for f in fields.values() if (f.compare if f.hash is None else f.hash))
        if not own.get("__doc__"):
            cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
        if "__match_args__" not in own:
            cls.__match_args__ = names
        if "__init__" not in own:
            cls.__init__ = _first_init(cls, frozen)
        if repr and "__repr__" not in own:
            cls.__repr__ = _repr
        if eq and "__eq__" not in own:
            cls.__eq__ = _eq
            if "__hash__" not in own:
                cls.__hash__ = _hash if frozen else None  # as dataclass: only a frozen one hashes
        if frozen:
            cls.__setattr__, cls.__delattr__ = _frozen(cls, names)
            if slots:  # pickling sets the fields back past __setattr__
                cls.__setstate__ = _setstate
        return cls

    return wrap if cls is None else wrap(cls)


def _fields(cls: type, own: dict) -> dict[str, dataclasses.Field]:
    """The fields of ``cls``: its bases' (a dataclass's), then those its body annotates, in
    order, as the standard ``dataclass`` makes them. An annotation is read as written (with
    ``from __future__ import annotations``, a string): ``ClassVar`` ones are no fields."""
    fields: dict[str, dataclasses.Field] = {}
    for base in cls.__mro__[-1:0:-1]:  # (a standard dataclass's keeps its class variables there too)
        fields.update((name, f) for name, f in (getattr(base, "__dataclass_fields__", None) or {}).items()
                      if f._field_type is dataclasses._FIELD)
    defaulted = None
    for name, kind in own.get("__annotations__", {}).items():
        head = (kind if isinstance(kind, str) else repr(kind)).partition("[")[0].rpartition(".")[2]
        if head == "ClassVar":
            continue
        if head in ("InitVar", "KW_ONLY"):
            raise TypeError(f"{cls.__qualname__}: lookout's dataclass takes no {head}")
        default = own.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            field = default
            if field.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, field.default)
        else:
            field = dataclasses.field(default=default)
        if isinstance(field.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(field.default)} for field {name} is not allowed: "
                             "use default_factory")
        field.name, field.type, field._field_type = name, kind, dataclasses._FIELD
        if field.kw_only is dataclasses.MISSING:
            field.kw_only = False
        fields[name] = field
    for field in fields.values():  # (the standard __init__'s compile says so, ours is compiled later)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if defaulted is not None:
                raise TypeError(f"non-default argument {field.name!r} follows default argument {defaulted!r}")
        elif defaulted is None:
            defaulted = field.name
    return fields


def _slotted(cls: type, own: dict, names: tuple[str, ...]) -> type:
    """``cls`` made again with a slot for each field its bases have none for (as ``slots=True``)."""
    if "__slots__" in own:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    inherited = {slot for base in cls.__mro__[1:-1] for slot in _slots(base)}
    body = {key: value for key, value in own.items() if key not in names and key not in ("__dict__", "__weakref__")}
    body["__slots__"] = tuple(name for name in names if name not in inherited)
    made = type(cls)(cls.__name__, cls.__bases__, body)
    made.__qualname__ = cls.__qualname__
    return made


def _slots(cls: type) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _params(frozen: bool, eq: bool, repr: bool, slots: bool) -> Any:
    """``__dataclass_params__`` as the standard ``dataclass`` sets it (a dataclass made by it
    from one of ours reads ``frozen`` there)."""
    first = {"init": True, "repr": repr, "eq": eq, "order": False, "unsafe_hash": False, "frozen": frozen}
    try:
        return dataclasses._DataclassParams(**first, match_args=True, kw_only=False, slots=slots, weakref_slot=False)
    except TypeError:  # Python 3.11: the first six only
        return dataclasses._DataclassParams(**first)


def _first_init(cls: type, frozen: bool):
    """An ``__init__`` that compiles ``cls``'s own the first time it runs, puts it in its place
    and runs it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        init = _init(cls, frozen)
        if cls.__dict__.get("__init__") is __init__:
            cls.__init__ = init
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _init(cls: type, frozen: bool):
    """``cls.__init__``: each field from its argument, its default or its default_factory."""
    env: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    params, body = [], []
    for f in cls.__dataclass_fields__.values():
        name, value = f.name, f.name
        if f.default is not dataclasses.MISSING:
            env[f"_d_{name}"] = f.default
            params.append(f"{name}=_d_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=_FACTORY")
            value = f"_f_{name}() if {name} is _FACTORY else {name}"
        else:
            params.append(name)
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    exec(f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"]), env)  # noqa: S102
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def _values(self, names: tuple[str, ...]) -> tuple:
    return tuple(getattr(self, name) for name in names)


def _eq(self, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self, self._compared) == _values(other, self._compared)


def _hash(self) -> int:
    return hash(_values(self, self._hashed))


@reprlib.recursive_repr()
def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
    return f"{self.__class__.__qualname__}({shown})"


def _frozen(cls: type, names: tuple[str, ...]):
    def __setattr__(self, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _setstate(self, state) -> None:
    if isinstance(state, tuple) and len(state) == 2:  # (__dict__, slots) as object.__getstate__ gives
        state = {**(state[0] or {}), **(state[1] or {})}
    for name, value in state.items():
        object.__setattr__(self, name, value)
