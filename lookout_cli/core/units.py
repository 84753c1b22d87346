"""The numbers people type: counts and sizes (``200k``, ``1.5M``, ``16MB``, ``2MiB``) and
percentages (``80``, ``"80%"``), for flags, configuration and the model catalogue alike."""

from __future__ import annotations

import math
import re

from lookout_cli.core.errors import LookoutError, quoted

_SIZE = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)\s*(?:([kmg])(i)?)?(b)?$", re.IGNORECASE)
_UNITS = {"": 0, "k": 1, "m": 2, "g": 3}


def parse_size(text: str | int) -> int:
    """A count from ``"200k"``, ``"1.5M"``, ``"120000"``, ``"120_000"`` or an int.

    k, M and G are decimal (1,000 ...), as model windows are quoted; a trailing B is
    allowed so byte sizes read naturally ("16MB"), and KiB/MiB/GiB are binary (1,024 ...).
    """
    if isinstance(text, bool):
        raise LookoutError(f"not a number: {quoted(text)}")
    if isinstance(text, int):
        if text < 0:
            raise LookoutError(f"a count cannot be negative: {text}")
        return text
    if not isinstance(text, str):
        raise LookoutError(f"not a number: {quoted(text)}")
    s = text.strip().replace("_", "").replace(",", "")
    if s.endswith("%"):
        raise LookoutError(f"a percentage is not allowed here: {quoted(text)}")
    m = _SIZE.match(s)
    if not m:
        raise LookoutError(f"not a number: {quoted(text)} (use one like 120000, 200k, 1.5M or 16MB)")
    number, unit, binary, _bytes = m.groups()
    if binary and not _bytes:
        raise LookoutError(f"not a number: {quoted(text)} (binary units are KiB, MiB, GiB)")
    power = _UNITS[(unit or "").lower()]
    value = float(number) * (1024 if binary else 1000) ** power
    if value != int(value) and not unit:
        raise LookoutError(f"a count must be a whole number: {quoted(text)}")
    return int(round(value))


def parse_percent(text: str | int | float) -> float:
    """A percentage in (0, 100] from ``80``, ``"80"`` or ``"80%"``."""
    if isinstance(text, bool):
        raise LookoutError(f"not a percentage: {quoted(text)}")
    if isinstance(text, str):
        s = text.strip().rstrip("%").strip()
        try:
            value = float(s)
        except ValueError:
            raise LookoutError(f"not a percentage: {quoted(text)}") from None
    elif isinstance(text, (int, float)):
        value = float(text)
    else:
        raise LookoutError(f"not a percentage: {quoted(text)}")
    if not (0 < value <= 100) or math.isnan(value):
        raise LookoutError(f"a percentage must be above 0 and at most 100, got {quoted(text)}")
    return value


def setting_number(value, key: str) -> float | None:
    """A number from the config or a flag (``75`` or ``"75%"``), None when unset; an error
    names the setting ``key``."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    try:
        return float(str(value).strip().removesuffix("%"))
    except ValueError:
        raise LookoutError(f"{key}: {quoted(value)} is not a number") from None
