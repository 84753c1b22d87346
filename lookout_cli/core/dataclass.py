"""The standard library's ``dataclass``, made for a program that starts on every prompt.

A dataclass compiles its ``__init__``, ``__repr__`` and ``__eq__`` (a frozen one also its
``__setattr__``, ``__delattr__`` and ``__hash__``) from generated source as its module is
imported, and reads each field's annotation with a regular expression: the 32 classes a
prompt's re-measure imports cost 12 ms of its 0.12 s. And importing ``dataclasses`` itself
loads ``inspect`` (with ``ast``, ``dis`` and ``tokenize``): 46 M instructions, an eighth of that
re-measure. Ours is a real dataclass (``dataclasses.fields``, ``replace``, ``asdict`` and orjson
read it as one: its ``__dataclass_fields__`` are the standard ``Field`` objects, made the first
time something reads them) whose fields are read off the class body as written, whose
``__init__`` is made from a few short lines the first time the class is called (most classes
a run imports it never makes; the code of each is compiled once and kept in the cache folder:
``_compiled``), and whose other methods are shared, read off the fields at call time (as a
field's ``repr``, ``compare`` and ``hash`` say). The same options as the standard
one: ``frozen``, ``slots``, ``eq``, ``repr``; what a class body defines itself is kept. A field
left out of ``__init__`` or keyword-only is refused: the ``__init__`` made here takes every
field in order. ``field``, ``fields``, ``replace`` and ``is_dataclass`` here are the standard
ones' for these classes, without importing it."""

from __future__ import annotations

import marshal
import os
import reprlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class _Factory:
    """An argument left to its field's default_factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


class Field:
    """A field as ``dataclasses.field`` describes it (the same attributes)."""

    __slots__ = ("compare", "default", "default_factory", "hash", "init", "kw_only", "metadata", "name", "repr",
                 "standard", "type")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
                 repr: bool = True, hash: bool | None = None, compare: bool = True, metadata: Any = None,
                 kw_only: Any = MISSING, standard: Any = None) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name: str = ""
        self.type: Any = None
        self.default, self.default_factory, self.init, self.repr = default, default_factory, init, repr
        self.hash, self.compare, self.metadata, self.kw_only = hash, compare, metadata, kw_only
        self.standard = standard  # the standard library's Field this one was read from, if any

    def __repr__(self) -> str:
        return f"Field(name={self.name!r},type={self.type!r},default={self.default!r})"


def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, repr: bool = True,
          hash: bool | None = None, compare: bool = True, metadata: Any = None, kw_only: Any = MISSING) -> Any:
    """``dataclasses.field``, for a class made by this ``dataclass``."""
    return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)


def fields(class_or_instance: Any) -> tuple:
    """``dataclasses.fields``: each field's ``name`` and ``type`` (and the rest), in order."""
    own = getattr(class_or_instance, "_field_specs", None)
    if own is None:
        import dataclasses

        return dataclasses.fields(class_or_instance)
    return tuple(own.values())


def replace(obj: Any, /, **changes: Any) -> Any:
    """``dataclasses.replace``: a new instance with ``changes`` made."""
    own = getattr(obj, "_field_specs", None)
    if own is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)
    unknown = changes.keys() - own.keys()
    if unknown:
        raise TypeError(f"{type(obj).__qualname__}.__init__() got an unexpected keyword argument {min(unknown)!r}")
    return obj.__class__(**{name: changes[name] if name in changes else getattr(obj, name) for name in own})


def is_dataclass(obj: Any) -> bool:
    """``dataclasses.is_dataclass``: ours without importing the standard one, which a class of
    its making needs already."""
    if hasattr(obj, "_field_specs"):
        return True
    standard = sys.modules.get("dataclasses")
    return standard is not None and standard.is_dataclass(obj)


def dataclass(cls: type | None = None, /, *, frozen: bool = False, slots: bool = False, eq: bool = True,
              repr: bool = True) -> Any:
    """``@dataclass`` or ``@dataclass(frozen=..., slots=..., eq=..., repr=...)`` on a class, as
    the standard library's."""

    def wrap(cls: type) -> type:
        own = dict(cls.__dict__)
        specs = _fields(cls, own)
        names = tuple(specs)
        odd = [f.name for f in specs.values() if not f.init or f.kw_only is True]
        if odd:
            raise TypeError(f"{cls.__qualname__}: lookout's dataclass takes every field in __init__, in order, "
                            f"not {', '.join(odd)}")
        if slots:
            cls = _slotted(cls, own, names)
        cls._field_specs = specs
        cls.__dataclass_fields__ = _Standard(cls, "__dataclass_fields__", _standard_fields)
        cls.__dataclass_params__ = _Standard(cls, "__dataclass_params__",
                                             lambda _: _params(frozen, eq, repr, slots))
        cls._shown = tuple(f.name for f in specs.values() if f.repr)
        cls._compared = tuple(f.name for f in specs.values() if f.compare)
        cls._hashed = tuple(f.name for f in specs.values() if (f.compare if f.hash is None else f.hash))
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


class _Standard:
    """A class attribute the standard ``dataclasses`` reads (its ``Field`` objects, its params),
    made when first read, then put in this one's place: most runs never read it, and making it
    imports ``dataclasses``."""

    def __init__(self, cls: type, name: str, make: Any) -> None:
        self.cls, self.name, self.make = cls, name, make

    def __get__(self, instance: Any, owner: type) -> Any:
        value = self.make(self.cls)
        setattr(self.cls, self.name, value)
        return value


def _standard_fields(cls: type) -> dict:
    import dataclasses

    made = {}
    for name, spec in cls._field_specs.items():
        standard = spec.standard
        if standard is None:
            standard = dataclasses.field(
                default=dataclasses.MISSING if spec.default is MISSING else spec.default,
                default_factory=dataclasses.MISSING if spec.default_factory is MISSING else spec.default_factory,
                init=spec.init, repr=spec.repr, hash=spec.hash, compare=spec.compare, metadata=spec.metadata,
                kw_only=False)
            standard.name, standard.type, standard._field_type = name, spec.type, dataclasses._FIELD
        made[name] = standard
    return made


def _fields(cls: type, own: dict) -> dict[str, Field]:
    """The fields of ``cls``: its bases' (a dataclass's), then those its body annotates, in
    order, as the standard ``dataclass`` makes them. An annotation is read as written (with
    ``from __future__ import annotations``, a string): ``ClassVar`` ones are no fields."""
    specs: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:  # (a standard dataclass's keeps its class variables there too)
        if "_field_specs" in base.__dict__:
            specs.update(base._field_specs)
        elif "__dataclass_fields__" in base.__dict__:  # a standard dataclass: dataclasses is loaded
            import dataclasses

            specs.update((name, _read(f)) for name, f in base.__dataclass_fields__.items()
                         if f._field_type is dataclasses._FIELD)
    defaulted = None
    for name, kind in own.get("__annotations__", {}).items():
        head = (kind if isinstance(kind, str) else repr(kind)).partition("[")[0].rpartition(".")[2]
        if head == "ClassVar":
            continue
        if head in ("InitVar", "KW_ONLY"):
            raise TypeError(f"{cls.__qualname__}: lookout's dataclass takes no {head}")
        default = own.get(name, MISSING)
        if isinstance(default, Field) or _is_standard_field(default):
            spec = default if isinstance(default, Field) else _read(default)
            if spec.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        else:
            spec = Field(default=default)
        if isinstance(spec.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not allowed: "
                             "use default_factory")
        spec.name, spec.type = name, kind
        if spec.standard is not None:
            import dataclasses

            spec.standard.name, spec.standard.type, spec.standard._field_type = name, kind, dataclasses._FIELD
            if spec.standard.kw_only is dataclasses.MISSING:
                spec.standard.kw_only = False
        if spec.kw_only is MISSING:
            spec.kw_only = False
        specs[name] = spec
    for spec in specs.values():  # (the standard __init__'s compile says so, ours is compiled later)
        if spec.default is MISSING and spec.default_factory is MISSING:
            if defaulted is not None:
                raise TypeError(f"non-default argument {spec.name!r} follows default argument {defaulted!r}")
        elif defaulted is None:
            defaulted = spec.name
    return specs


def _is_standard_field(value: Any) -> bool:
    standard = sys.modules.get("dataclasses")  # a standard Field: dataclasses made it
    return standard is not None and isinstance(value, standard.Field)


def _read(standard: Any) -> Field:
    """Ours for a standard library ``Field``, keeping it (it is what ``__dataclass_fields__`` shows)."""
    import dataclasses

    def ours(value: Any) -> Any:
        return MISSING if value is dataclasses.MISSING else value

    spec = Field(ours(standard.default), ours(standard.default_factory), standard.init, standard.repr,
                 standard.hash, standard.compare, standard.metadata, ours(standard.kw_only), standard)
    spec.name, spec.type = standard.name, standard.type
    return spec


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
    import dataclasses

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
    for f in cls._field_specs.values():
        name, value = f.name, f.name
        if f.default is not MISSING:
            env[f"_d_{name}"] = f.default
            params.append(f"{name}=_d_{name}")
        elif f.default_factory is not MISSING:
            env[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=_FACTORY")
            value = f"_f_{name}() if {name} is _FACTORY else {name}"
        else:
            params.append(name)
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"])
    exec(_compiled(source), env)  # noqa: S102
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


KEEP_MAX = 1000  # compiled sources kept at most: past that, those of the last run only
_kept: dict[str, Any] | None = None  # source -> code, as read from ``_kept_path`` (and added to)
_kept_path = ""  # the file, named when first read (a test's cache folder may be another at exit)
_used: set[str] = set()  # the sources this run asked for
_missed: list[str] = []  # those it compiled


def _compiled(source: str) -> Any:
    """The code of ``source``, a generated ``__init__``: kept in the cache folder from one run to
    the next (compiling the twenty or thirty a run makes was 3 ms of a prompt's measure),
    compiled where it is not kept (a new class, another Python)."""
    global _kept, _kept_path
    if _kept is None:
        from lookout_cli.core.paths import cache_folder

        # (bytecode and marshal's format are the interpreter's: a file for each)
        _kept_path = os.path.join(cache_folder(),
                                  f"inits-{sys.implementation.cache_tag}-{sys.version_info.micro}.marshal")
        _kept = _read_kept(_kept_path)
    code = _kept.get(source)
    if code is None:
        code = _kept[source] = compile(source, "<dataclass>", "exec")
        if not _missed:
            import atexit

            atexit.register(_keep)
        _missed.append(source)
    _used.add(source)
    return code


def _read_kept(path: str) -> dict[str, Any]:
    """The kept code, when the file is this user's and no one else may write it (it is code this
    process runs: a cache folder others can write to gives them none of it)."""
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
                return {}  # (where files have owners: elsewhere the mode says nothing of others)
            kept = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):  # none yet, or damaged: compiled again
        return {}
    code_type = type(_compiled.__code__)
    if not isinstance(kept, dict) or not all(type(c) is code_type for c in kept.values()):
        return {}
    return kept


def _keep() -> None:
    """At exit, when this run compiled some: the kept and the new, for the next runs (best effort:
    written to a temporary name, then renamed over the old one; not where the cache folder is
    no more, or not yet: the run kept nothing else there)."""
    kept = _kept or {}
    if len(kept) > KEEP_MAX:
        kept = {source: kept[source] for source in _used}
    folder, name = os.path.split(_kept_path)
    # (written here, not by fsutil's atomic_write: fsutil makes its classes with this module;
    # its names are fsutil's temporary names, which it sweeps when a run left one)
    temp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
    try:
        # (as lookout's other cache files: new, its own, read by this user only)
        with open(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), "wb") as out:
            marshal.dump(kept, out)
        os.replace(temp, _kept_path)
    except (OSError, ValueError):
        try:
            os.unlink(temp)
        except OSError:
            pass


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
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _setstate(self, state) -> None:
    if isinstance(state, tuple) and len(state) == 2:  # (__dict__, slots) as object.__getstate__ gives
        state = {**(state[0] or {}), **(state[1] or {})}
    for name, value in state.items():
        object.__setattr__(self, name, value)
