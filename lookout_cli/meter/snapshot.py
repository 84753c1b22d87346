"""The last ``measure`` of a transcript file, kept so that measuring it again unchanged reads
nothing but its size, times and guard hashes (research/performance.md §4, B8).

Status lines and hooks measure the same session again and again, mostly when nothing was
written. The snapshot is the finished :class:`~lookout_cli.meter.analysis.Meter` (plain figures, no
records) stored as JSON in the incremental state of :mod:`lookout_cli.meter.state`, under a
key made of everything else the figures depend on: lookout's version, the settings and the
format flag. It is used only when the file is the one measured (same device and inode, size,
modification time and guard hashes) and the setup files it read (``--system``…, CLAUDE.md and
AGENTS.md in the transcript's folder, present or not) have not changed since. The warm-cache
figures are worked out again for the time of the new run. A quiet run that found or saved a
snapshot tells :mod:`lookout_cli.meter.replay` what its figures describe, so it can be replayed.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import sys
from collections.abc import Callable

from lookout_cli import __version__
from lookout_cli.core.dataclass import fields, is_dataclass
from lookout_cli.core.file_guard import digest, stamp
from lookout_cli.core.times import parse_time
from lookout_cli.meter import replay
from lookout_cli.meter import state as measure_state
from lookout_cli.meter.analysis import RULES_FILES, Meter, Settings
from lookout_cli.meter.cost import warm_from

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

SCHEMA = 2  # 2: the series by column
REUSED = "the file is unchanged since it was last measured: these figures are reused (--no-cache measures again)"


def settings_key(settings: Settings, format_name: str | None) -> str:
    """What the figures depend on besides the file and the setup files' contents."""
    values = {f.name: getattr(settings, f.name) for f in fields(settings) if f.name != "now"}
    text = json.dumps([SCHEMA, __version__, format_name, values], sort_keys=True, default=str)
    return "meter-" + digest(text.encode("utf-8", "surrogatepass"))[:24]


def _setup_files(settings: Settings, cwd: str | None) -> list[list]:
    paths = [p for p in settings.setup_files.values() if p]
    if settings.discover_rules and cwd:
        paths += [os.path.join(cwd, name) for name in RULES_FILES]
    return [stamp(p) for p in paths]


def load(path: str, settings: Settings, format_name: str | None, points: bool = True) -> Meter | None:
    """The stored meter of ``path`` when neither the file nor its setup changed, else None (and
    when ``points`` asks for its series, which a quiet run's meter does not hold)."""
    plan = measure_state.plan(path, settings_key(settings, format_name), totals_for=(measure_state.UNCHANGED,))
    if plan.kind != measure_state.UNCHANGED:
        return None
    totals = plan.state.totals
    try:
        st = os.stat(path)
        if totals["mtime_ns"] != st.st_mtime_ns or totals["setup"] != _setup_files(settings, totals["cwd"]):
            return None
        if points and totals["meter"].get("series") is None:
            return None
        meter = _decode(Meter, totals["meter"])
        at = parse_time(totals["warm_at"])
    except (OSError, KeyError, TypeError, ValueError, AttributeError):
        return None  # another lookout's or a damaged snapshot: measure again
    if meter.warm is not None and at is not None:  # the one figure that moves with the clock
        now = settings.now or dt.datetime.now(dt.timezone.utc)
        meter.warm = warm_from(meter.warm.tier, meter.warm.tier_source, at, now)
    meter.notes.append(REUSED)
    replay.seen(path, plan.state.offset, totals["mtime_ns"], totals["setup"])
    return meter


def save(path: str, settings: Settings, format_name: str | None, meter: Meter, measured: int,
         cwd: str | None, warm_at: str | None) -> None:
    """Remember ``meter.analysis`` for ``path``, measured over its first ``measured`` bytes (a line
    boundary); ``warm_at`` is the last response's time, which the warm-cache figures count
    from. Best effort: a snapshot that cannot be written costs only speed."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if st.st_size != measured:
        return  # the file changed while it was read (or its last line is incomplete)
    totals = {"mtime_ns": st.st_mtime_ns, "cwd": cwd, "setup": _setup_files(settings, cwd),
              "warm_at": warm_at, "meter": meter}
    measure_state.commit(path, settings_key(settings, format_name), measured, totals)
    replay.seen(path, measured, st.st_mtime_ns, totals["setup"])


def _decode(kind: type, value: dict) -> Any:
    """Rebuild the dataclass ``kind`` from its ``asdict`` JSON."""
    return kind(**{name: value[name] if build is None else build(value[name])
                   for name, build in _builders(kind) if name in value})


@functools.cache
def _builders(kind: type) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
    names = vars(sys.modules[kind.__module__])
    return tuple((f.name, _builder(f.type, names)) for f in fields(kind))


def _builder(annotation: Any, names: dict[str, Any]) -> Callable[[Any], Any] | None:
    """How to rebuild a field from JSON by its annotation (a dataclass, a list of them, either
    or None), or None when JSON holds the value as it is. The annotation is read as the text the
    meter's module leaves it (``from __future__ import annotations``), not evaluated:
    typing.get_type_hints compiled every one, a third of the time a reuse took."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    bare = text.removesuffix(" | None")
    if bare.startswith("list[") and bare.endswith("]"):
        inner = _builder(bare[5:-1], names)
        build = (lambda value: [inner(v) for v in value]) if inner else None
    else:
        kind = names.get(bare)
        build = functools.partial(_decode, kind) if is_dataclass(kind) else None
    if build is not None and bare != text:
        return lambda value: None if value is None else build(value)
    return build
