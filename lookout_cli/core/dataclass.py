"""The standard library's ``dataclass``, made for a program that starts on every prompt.

A dataclass compiles its ``__init__``, ``__repr__`` and ``__eq__`` (a frozen one also its
``__setattr__``, ``__delattr__`` and ``__hash__``) from generated source as its module is
imported: the 31 a prompt's re-measure imports cost 30 M of its 470 M instructions. Ours is a
real dataclass (``dataclasses.fields``, ``replace``, ``asdict`` and orjson read it as one)
whose ``__init__`` is compiled from a few short lines and whose other methods are shared, read
off the fields at call time (as a field's ``repr``, ``compare`` and ``hash`` say). The same
options as the standard one: ``frozen``, ``slots``, ``eq``, ``repr``; what a class body defines
itself is kept. A field left out of ``__init__`` or keyword-only is refused: the ``__init__``
made here takes every field in order."""

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
        documented = bool(own.get("__doc__"))
        if not documented:  # else dataclass reads one off object.__init__'s signature (a parse)
            cls.__doc__ = cls.__name__
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)
        fields = dataclasses.fields(cls)
        odd = [f.name for f in fields if not f.init or f.kw_only]
        if odd:
            raise TypeError(f"{cls.__qualname__}: lookout's dataclass takes every field in __init__, in order, "
                            f"not {', '.join(odd)}")
        names = tuple(f.name for f in fields)
        cls._shown = tuple(f.name for f in fields if f.repr)
        cls._compared = tuple(f.name for f in fields if f.compare)
        cls._hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        if not documented:
            cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
        if "__init__" not in own:
            cls.__init__ = _init(cls, frozen)
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


def _init(cls: type, frozen: bool):
    """``cls.__init__``: each field from its argument, its default or its default_factory."""
    env: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    params, body = [], []
    for f in dataclasses.fields(cls):
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
