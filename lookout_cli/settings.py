"""Every key a config file or ``LOOKOUT_*`` variable may set, with the rule its value must
follow: the rule of the matching flag where there is one (``compaction.tail_turns`` is a whole
number of 1 or more, as ``--tail-turns`` is). ``config`` checks every layer against
this table when it loads, so a typo or a wrong value stops the run with one line that says
where it came from instead of being ignored.

A check takes a value and raises ``ValueError`` or ``LookoutError`` with what is wrong with it
(the caller adds the key and where the value came from); what it returns is ignored, so
commands read the values as they always did.
"""

from __future__ import annotations

from collections.abc import Callable

from lookout_cli.core.errors import quoted
from lookout_cli.core.units import parse_percent, parse_size

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off")


def yes_no(value: Any) -> bool:
    """A yes/no setting: true/false, yes/no, on/off or 1/0; anything else is refused rather
    than read as one or the other."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in YES:
        return True
    if word in NO:
        return False
    raise ValueError(f"{quoted(value)} is not true or false (also yes/no, on/off, 1/0)")


def as_number(value: Any, kind: type = float, minimum: float | None = None, maximum: float | None = None):
    """``value`` as ``kind`` (int: a whole number), within ``minimum``..``maximum``."""
    try:
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError  # true is not 1, nor 2.5 a whole number
        number = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{quoted(value)} is not a {'whole ' if kind is int else ''}number") from None
    if maximum is not None and not minimum <= number <= maximum:
        raise ValueError(f"{quoted(value)} must be from {minimum:g} to {maximum:g}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{quoted(value)} must be {minimum:g} or more")
    return number


def _budget(value: Any) -> None:
    """tokens.budget.parse_budget's rule: tokens (200k) or a share of the window (80%), above 0."""
    if isinstance(value, str) and value.strip().endswith("%"):
        parse_percent(value)
    elif parse_size(value) <= 0:
        raise ValueError(f"a budget must be more than 0 tokens, got {quoted(value)}")


def _text(value: Any) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{quoted(value)} is not text")


def _texts(value: Any) -> None:
    """A list of text, or one text of comma-separated items."""
    if isinstance(value, str):
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{quoted(value)} is not a list of text")


def _whole(minimum: int, maximum: int | None = None) -> Callable[[Any], None]:
    return lambda value: as_number(value, int, minimum, maximum)


def _real(minimum: float) -> Callable[[Any], None]:
    return lambda value: as_number(value, float, minimum)


def _one_of(*words: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not isinstance(value, str) or value.strip().lower().replace("_", "-") not in words:
            raise ValueError(f"{quoted(value)} is not {', '.join(words[:-1])} or {words[-1]}")
    return check


def _summarizer(value: Any) -> None:
    """compaction.summarizers.make's specs."""
    _text(value)
    spec = value.strip()
    if spec != "embedded" and not spec.startswith("command:") and spec.partition(":")[0] not in ("openai", "anthropic"):
        raise ValueError(f"unknown summarizer {quoted(value)} (use embedded, command:'CMD', openai or anthropic)")


def _window(value: Any) -> None:
    """A model's context window: tokens (128k, 1M), at least 4,000 (a prompt and a note)."""
    if parse_size(value) < 4_000:
        raise ValueError(f"a summary model's window must be 4,000 tokens or more, got {quoted(value)}")


def _daily_resets(value: Any) -> None:
    """Times of day (HH:MM, UTC): a list, one text of several, or a table of them by provider."""
    from lookout_cli.compaction.idle_plan import parse_reset

    tables = value.values() if isinstance(value, dict) else [value]
    for times in tables:
        _texts(times)
        for text in times.replace(",", " ").split() if isinstance(times, str) else times:
            parse_reset(text)


def _models(value: Any) -> None:
    """``[models."NAME"]`` tables of the fields tokens.models accepts in models.toml."""
    from lookout_cli.tokens.models import check_fields

    if not isinstance(value, dict):
        raise ValueError(f"{quoted(value)} is not a table of models")
    for name, fields in value.items():
        if not isinstance(fields, dict):
            raise ValueError(f"{name}: {quoted(fields)} is not a table of fields")
        check_fields(name, fields)


class Setting:
    """A key's check, and how a variable sets it. (Not a dataclass: making one costs every
    run 2 ms.)"""

    __slots__ = ("check", "text", "variable")

    def __init__(self, check: Callable[[Any], None], text: bool = False, variable: bool = True) -> None:
        self.check = check
        self.text = text  # its variable's value is taken as written, not read as a TOML value
        self.variable = variable  # a LOOKOUT_* variable may set it


TEXT = Setting(_text, text=True)
YES_NO = Setting(yes_no)
COUNT = Setting(_whole(0))  # a whole number of 0 or more, as click.IntRange(0)

SETTINGS: dict[str, Setting] = {
    "model": TEXT,
    "budget": Setting(_budget),
    "save_dir": TEXT,
    "max_tool_output_chars": COUNT,
    "compaction.auto": YES_NO,
    "compaction.threshold_percent": Setting(parse_percent),
    "compaction.target_percent": Setting(parse_percent),
    "compaction.reserved": COUNT,
    "compaction.prune": YES_NO,
    "compaction.tail_turns": Setting(_whole(1)),
    "compaction.preserve_recent_tokens": COUNT,
    "compaction.summary_tokens": Setting(_whole(1)),
    "compaction.prune_protect_tokens": COUNT,
    "compaction.prune_minimum_tokens": COUNT,
    "compaction.tokenize_all": YES_NO,
    "compaction.jobs": Setting(_whole(1)),
    "compaction.on_failure": Setting(_one_of("stop", "truncate")),
    "compaction.summarizer": Setting(_summarizer, text=True),
    "compaction.model": TEXT,
    "compaction.base_url": TEXT,
    "compaction.api_key_env": TEXT,
    "compaction.timeout": Setting(_real(0.1)),
    "compaction.summary_context_window": Setting(_window),
    "images.budget": Setting(parse_size),
    "images.keep_recent": COUNT,
    "measure.model": TEXT,
    "measure.estimate": YES_NO,
    "measure.cache": YES_NO,
    "measure.jobs": Setting(_whole(1)),
    "report.jobs": Setting(_whole(1)),
    "meter.amber": Setting(parse_percent),
    "meter.red": Setting(parse_percent),
    "mentions.root": TEXT,
    "mentions.max_mentions": COUNT,
    "mentions.max_chars": COUNT,
    "mentions.max_images": COUNT,
    "mentions.max_files": COUNT,
    "mentions.max_bytes": COUNT,
    "mentions.workspace_entries": COUNT,
    "mentions.max_image_side": Setting(_whole(16, 8000)),
    "mentions.allow_secret": Setting(_texts, text=True),
    "memory.save_everywhere": Setting(_one_of("ask", "only-me", "agents"), text=True),
    "memory.read_everywhere": YES_NO,
    "idle.mode": Setting(_one_of("prepare", "compact", "off"), text=True),
    "idle.cache_ttl": Setting(_one_of("5m", "1h"), text=True),
    "idle.daily_resets": Setting(_daily_resets, text=True),
    "idle.min_tokens": COUNT,
    "idle.lead": Setting(_real(0)),
    "idle.ping_margin": Setting(_real(1)),
    "idle.on_ping": TEXT,
    "idle.on_prepare": TEXT,
    "idle.hook_timeout": Setting(_real(0.1)),
    "models": Setting(_models, variable=False),
}

# The tables keys sit in ("compaction" of "compaction.tail_turns").
TABLES = frozenset(key.rpartition(".")[0] for key in SETTINGS if "." in key)

# LOOKOUT_* variables lookout reads that are not settings: where its files are, test clocks,
# and what prepare-idle hands its hooks and the git hook reads (a hook may run lookout again).
OTHER_VARIABLES = frozenset({
    "LOOKOUT_CONFIG", "LOOKOUT_NO_CONFIG", "LOOKOUT_DATA_DIR", "LOOKOUT_CACHE_DIR", "LOOKOUT_NOW",
    "LOOKOUT_DEBUG", "LOOKOUT_HOST", "LOOKOUT_FAIL_AT", "LOOKOUT_TRANSCRIPTS",
    "LOOKOUT_HOOK", "LOOKOUT_TRANSCRIPT", "LOOKOUT_SESSION", "LOOKOUT_CHAT_MODEL", "LOOKOUT_TIER",
    "LOOKOUT_TOKENS", "LOOKOUT_STATE", "LOOKOUT_LAST_RESPONSE", "LOOKOUT_EXPIRES", "LOOKOUT_READS_LEFT",
    "LOOKOUT_PING_COST", "LOOKOUT_COLD_COST", "LOOKOUT_SUMMARY_FILE",
})


def variable(key: str) -> str:
    """The ``LOOKOUT_*`` variable that sets ``key``."""
    return "LOOKOUT_" + key.upper().replace(".", "_").replace("-", "_")


VARIABLES = {variable(key): key for key, setting in SETTINGS.items() if setting.variable}


def nearest(name: str, spellings: dict[str, str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``spellings`` (what may be typed: what it
    suggests) to ``name``; else nothing."""
    import difflib  # only on an error

    match = difflib.get_close_matches(name, list(spellings), 1, 0.75)
    return f" (did you mean {spellings[match[0]]!r}?)" if match else ""


def key_spellings() -> dict[str, str]:
    """Each key, by itself and by its last part (``tail_turns`` at the top of a file)."""
    spellings = {key: key for key in SETTINGS}
    for key in SETTINGS:
        spellings.setdefault(key.rpartition(".")[2], key)
    return spellings


def variable_spellings() -> dict[str, str]:
    """Each variable without ``LOOKOUT_``, and by its key's last part (``LOOKOUT_TAIL_TURNS``)."""
    spellings = {name.removeprefix("LOOKOUT_"): name for name in (*VARIABLES, *OTHER_VARIABLES)}
    for name, key in VARIABLES.items():
        spellings.setdefault(key.rpartition(".")[2].upper(), name)
    return spellings
