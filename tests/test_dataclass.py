"""lookout's ``dataclass`` (lookout_cli.core.dataclass) behaves as the standard library's for the
options the project uses: each class below is made by both, and every difference is a failure."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import sys
from typing import ClassVar  # noqa: F401 - the standard dataclass finds it by name in this module

import orjson
import pytest
from conftest import DATA, real_transcripts, run_lookout

from lookout_cli.core.dataclass import dataclass

OPTIONS = [{}, {"slots": True}, {"frozen": True}, {"frozen": True, "slots": True}, {"slots": True, "eq": False},
           {"slots": True, "eq": False, "repr": False}]


def _classes(make):
    """The same bodies through ``make``: a plain record, one with defaults and a factory, a
    subclass adding a field, one defining its own ``__eq__``, one with ``__post_init__``."""

    class Plain:
        a: int
        b: str

    class Defaults:
        """Has a docstring."""

        a: int
        b: tuple = ()
        c: list = dataclasses.field(default_factory=list)
        d: str | None = None

    class Base:
        a: int

    class Child(Base):
        b: int = 2

    class OwnEq:
        a: int

        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    class Partial:  # as models.Model's aliases: not compared
        a: int
        b: tuple = dataclasses.field(default=(), compare=False)
        c: int = dataclasses.field(default=0, repr=False)
        d: int = dataclasses.field(default=0, hash=False)

    class Post:
        a: int
        b: int = 0

        def __post_init__(self):
            object.__setattr__(self, "b", self.a * 2)

    made = {"Plain": make(Plain), "Defaults": make(Defaults), "OwnEq": make(OwnEq), "Post": make(Post),
            "Partial": make(Partial)}
    made["Child"] = make(type("Child", (made_base := make(Base),), dict(Child.__dict__)))
    made["Base"] = made_base
    return made


ARGS = {"Plain": (1, "x"), "Defaults": (1,), "Base": (1,), "Child": (1,), "OwnEq": (1,), "Post": (3,),
        "Partial": (1, ("x",), 2, 3)}
OTHER = {"Plain": (1, "y"), "Defaults": (2,), "Base": (2,), "Child": (1, 3), "OwnEq": (2,), "Post": (4,),
         "Partial": (1, ("y",), 2, 3)}  # equal but for what is not compared


def _behaviour(cls, args, other, frozen: bool) -> list:
    one, same, different = cls(*args), cls(*args), cls(*other)
    seen = [re.sub(r" at 0x[0-9a-f]+", "", repr(one).split(".")[-1]), one == same, one != different, one == "text",
            one == different and hash(one) == hash(different) if cls.__hash__ is not None else one == different,
            [f.name for f in dataclasses.fields(cls)], dataclasses.asdict(one), dataclasses.astuple(one),
            dataclasses.is_dataclass(cls), cls.__match_args__, orjson.dumps(one),
            dataclasses.asdict(dataclasses.replace(one, a=9)), dataclasses.asdict(copy.deepcopy(one))]
    seen.append(cls.__hash__ is None)
    if cls.__hash__ is not None and all(isinstance(v, (int, str, tuple, type(None))) for v in dataclasses.astuple(one)):
        seen.append(hash(one) == hash(same))
    try:
        one.a = 5
        seen.append(("assigned", one.a))
    except dataclasses.FrozenInstanceError as exc:
        seen.append(("frozen", str(exc)))
    if frozen:
        try:
            del one.a
        except dataclasses.FrozenInstanceError as exc:
            seen.append(("frozen", str(exc)))
    seen.append(dataclasses.asdict(copy.copy(same)))  # (what pickling does: reduce, then set the state)
    with pytest.raises(TypeError):
        cls()  # a field without a default is required
    return seen


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_it_behaves_as_the_standard_dataclass(options):
    ours = _classes(lambda cls: dataclass(**options)(cls))
    theirs = _classes(lambda cls: dataclasses.dataclass(**options)(cls))
    frozen = options.get("frozen", False)
    for name, args in ARGS.items():
        assert _behaviour(ours[name], args, OTHER[name], frozen) == _behaviour(theirs[name], args, OTHER[name], frozen), name
    # each instance gets its own factory-made value; a docstring is kept, a missing one made
    assert ours["Defaults"](1).c is not ours["Defaults"](1).c
    assert ours["Defaults"].__doc__ == "Has a docstring." and ours["Plain"].__doc__ == "Plain(a, b)"
    assert ours["Post"](3).b == 6


def test_a_mutable_default_is_refused_as_the_standard_one_refuses_it():
    with pytest.raises(ValueError, match="mutable default"):
        @dataclass
        class Bad:
            a: list = []  # noqa: RUF012


@pytest.mark.parametrize("field", [dataclasses.field(default=0, init=False), dataclasses.field(default=0, kw_only=True)],
                         ids=["init", "kw_only"])
def test_a_field_left_out_of_init_is_refused(field):
    """The ``__init__`` made here takes every field in order: a field the standard one would
    leave out of it, or take by keyword only, would be served wrong, so it is refused."""
    with pytest.raises(TypeError, match="every field in __init__, in order, not b"):
        dataclass(type("Odd", (), {"__annotations__": {"a": "int", "b": "int"}, "b": field}))


def test_class_variables_are_no_fields_and_what_it_cannot_make_is_refused():
    @dataclass(slots=True)
    class Kinds:
        a: int
        TABLE: ClassVar[dict[str, str]] = {"x": "y"}  # noqa: RUF012

    assert [f.name for f in dataclasses.fields(Kinds)] == ["a"] and Kinds.TABLE == {"x": "y"} and Kinds(1).a == 1
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument 'a'"):
        dataclass(type("Order", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 0}))
    with pytest.raises(TypeError, match="takes no InitVar"):
        dataclass(type("Init", (), {"__annotations__": {"a": "InitVar[int]"}}))


def test_init_is_compiled_on_the_first_call_and_then_is_the_class_own():
    """Most classes a run imports it never makes: their ``__init__`` is not compiled at import."""

    @dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: int = 0

    waiting = Point.__init__
    assert Point(1) == Point(1, 0) and Point.__init__ is not waiting
    assert Point.__init__.__code__.co_varnames[:3] == ("self", "x", "y")  # the compiled one, by name
    with pytest.raises(TypeError):
        Point(1, 2, 3)


def test_the_standard_dataclass_builds_on_ours_and_ours_on_it():
    """A standard dataclass made from one of ours reads its fields and whether it is frozen; one
    of ours made from a standard one takes its fields, not its class variables."""
    @dataclasses.dataclass
    class Standard:
        a: int
        KIND: ClassVar[str] = "standard"

    @dataclass(slots=True)
    class Ours(Standard):
        b: int = 0

    assert [f.name for f in dataclasses.fields(Ours)] == ["a", "b"] and Ours(1, 2).b == 2 and Ours.KIND == "standard"

    @dataclass(frozen=True, slots=True)
    class Base:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Child(Base):
        y: int = 0

    assert [f.name for f in dataclasses.fields(Child)] == ["x", "y"] and Child(1, 2).y == 2
    with pytest.raises(TypeError, match="non-frozen dataclass from a frozen one"):
        @dataclasses.dataclass
        class Thawed(Base):
            z: int = 0


@pytest.fixture
def fresh_kept(monkeypatch, tmp_path):
    """The compiled ``__init__``s as a new process finds them: none read yet, none compiled."""
    from lookout_cli.core import dataclass as made

    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(made, "_kept", None)
    monkeypatch.setattr(made, "_used", set())
    monkeypatch.setattr(made, "_missed", [])
    monkeypatch.setattr("atexit.register", lambda function: None)  # (this process's exit is not a run's)
    return made


def _point():
    @dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: list = dataclasses.field(default_factory=list)

        def __post_init__(self):
            self.y.append(self.x)

    return Point


def test_a_compiled_init_is_kept_for_the_next_run_which_compiles_none(fresh_kept, monkeypatch, tmp_path):
    """The ``__init__``s a run compiled are kept in the cache folder (``_keep``, at exit): the next
    run (its state read anew) makes the same classes without compiling, and they work the same."""
    assert _point()(1).y == [1] and len(fresh_kept._missed) == 1
    fresh_kept._keep()
    tag = f"{sys.implementation.cache_tag}-{sys.version_info.micro}"
    assert [p.name for p in tmp_path.iterdir()] == [f"inits-{tag}.marshal"]
    monkeypatch.setattr(fresh_kept, "_kept", None)
    monkeypatch.setattr(fresh_kept, "_missed", [])
    compiled = []
    monkeypatch.setattr(fresh_kept, "compile", lambda *a: compiled.append(a) or compile(*a), raising=False)
    point = _point()(2, [0])
    assert point.y == [0, 2] and compiled == [] and not fresh_kept._missed
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 3

    @dataclass
    class Other:  # another body: compiled
        a: int = 0

    assert Other().a == 0 and len(compiled) == 1


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_kept_code_others_may_write_is_not_run(fresh_kept, tmp_path):
    """The kept ``__init__`` are code this process runs: a file that another user may write (a
    cache folder shared with others) is not read, the code compiled again."""
    assert _point()(1).y == [1]
    fresh_kept._keep()
    (kept,) = tmp_path.iterdir()
    for mode, read in ((0o600, True), (0o644, True), (0o620, False), (0o666, False)):
        kept.chmod(mode)
        fresh_kept._kept, fresh_kept._missed = None, []
        assert _point()(2).y == [2] and len(fresh_kept._missed) == (not read), oct(mode)


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", "marshal of another value", "truncated"])
def test_a_damaged_kept_file_only_costs_a_compile(fresh_kept, tmp_path, damage):
    import marshal

    assert _point()(1).y == [1]
    fresh_kept._keep()
    (kept,) = tmp_path.iterdir()
    whole = kept.read_bytes()
    kept.write_bytes(marshal.dumps({"def __init__(self): pass": 1}) if damage == "marshal of another value"
                     else whole[:len(whole) // 2] if damage == "truncated" else damage)
    fresh_kept._kept, fresh_kept._missed = None, []
    assert _point()(4).y == [4] and len(fresh_kept._missed) == 1  # read as none, compiled again
    fresh_kept._keep()
    assert marshal.loads(kept.read_bytes()).keys() == marshal.loads(whole).keys()


@pytest.mark.parametrize("path", [DATA / "measure" / "claude-small.jsonl", *real_transcripts()],
                         ids=lambda p: p.name[:40])
def test_a_measure_keeps_its_inits_and_the_next_compiles_none(tmp_path, rank_tables, path):
    """The installed lookout, run twice on the same transcript (the real ones, every format) in
    a new cache folder: the first writes the kept file, the second finds every ``__init__`` it
    needs there, leaves the file as it was and reports the same; a run without the file (another
    new folder) reports the same too."""
    def run(folder):
        folder.mkdir(exist_ok=True)
        for table in rank_tables:  # (the install's tables, as every test's cache folder has them)
            if not (folder / table.name).exists():
                os.link(table, folder / table.name)
        done = run_lookout("measure", "--json", "--no-discover", "--no-cache", "--now", "2026-11-29T12:00:00Z",
                           str(path), env={**os.environ, "LOOKOUT_CACHE_DIR": str(folder)})
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = run(tmp_path / "cache")
    (kept,) = (tmp_path / "cache").glob("inits-*.marshal")
    before = kept.stat()
    assert os.name != "posix" or before.st_mode & 0o777 == 0o600  # (the user's alone, as the other cache files)
    assert run(tmp_path / "cache") == first
    after = kept.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert run(tmp_path / "other") == first
