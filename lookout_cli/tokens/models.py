"""Known models and what lookout needs to know about them (data in ``data/models.toml``).

``lookup(name)`` accepts the names transcripts and configs actually carry: exact ids,
dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-5-2025-08-07``), ``-latest``,
``provider/name`` (OpenRouter, LiteLLM, ``models/gemini-…``), Bedrock
(``us.anthropic.claude-…-v1:0``) and Vertex (``claude-…@20250929``) forms, dots or
dashes in versions (``claude-sonnet-4.5``), and listed aliases. An unknown name still
gets a usable Model built from ``[defaults]``, with ``known=False`` and a label that
says the numbers are assumed.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from lookout_cli.core.dataclass import dataclass, field, fields
from lookout_cli.core.errors import LookoutError, quoted
from lookout_cli.core.units import parse_size

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

# Fields a models.toml entry or a config override may set, with their kinds.
_INT_FIELDS = (
    "context_window",
    "input_limit",
    "max_output",
    "summary_point",
    "long_context_threshold",
)
_PRICE_FIELDS = (
    "price_input",
    "price_output",
    "price_cache_write_5m",
    "price_cache_write_1h",
    "price_cache_read",
    "long_price_input",
    "long_price_output",
    "long_price_cache_write_5m",
    "long_price_cache_write_1h",
    "long_price_cache_read",
)
_OTHER_FIELDS = ("provider", "encoding", "cache_ttls", "aliases", "base")
FIELDS = frozenset(_INT_FIELDS + _PRICE_FIELDS + _OTHER_FIELDS)


@dataclass(frozen=True)
class Model:
    """One model's limits and prices. Prices are USD per million tokens; None = unknown."""

    name: str
    provider: str | None
    known: bool
    label: str
    context_window: int
    input_limit: int | None = None
    max_output: int | None = None
    summary_point: int | None = None
    price_input: float | None = None
    price_output: float | None = None
    price_cache_write_5m: float | None = None
    price_cache_write_1h: float | None = None
    price_cache_read: float | None = None
    long_context_threshold: int | None = None
    long_price_input: float | None = None
    long_price_output: float | None = None
    long_price_cache_write_5m: float | None = None
    long_price_cache_write_1h: float | None = None
    long_price_cache_read: float | None = None
    cache_ttls: tuple[int, ...] = ()
    encoding: str = "o200k_base"
    aliases: tuple[str, ...] = field(default=(), compare=False)

    @property
    def has_input_limit(self) -> bool:
        """True when the prompt has its own cap apart from the output (GPT-5, Gemini)."""
        return self.input_limit is not None

    @property
    def prompt_limit(self) -> int:
        """The most prompt tokens one request may carry."""
        return self.input_limit if self.input_limit is not None else self.context_window

    @property
    def exact_tokenizer(self) -> bool:
        """Whether ``encoding`` is the model's own tokenizer (OpenAI) or a stand-in."""
        return self.provider == "openai"

    def cost(
        self,
        input: int = 0,
        output: int = 0,
        cache_write_5m: int = 0,
        cache_write_1h: int = 0,
        cache_read: int = 0,
    ) -> float | None:
        """USD for one request's tokens, or None when a price it needs is unknown.

        ``input`` is uncached input. A request whose prompt (input + cache writes + cache
        reads) is over ``long_context_threshold`` pays the long-context rates throughout.
        """
        prompt = input + cache_write_5m + cache_write_1h + cache_read
        long = self.long_context_threshold is not None and prompt > self.long_context_threshold
        total = 0.0
        for tokens, key in (
            (input, "input"),
            (output, "output"),
            (cache_write_5m, "cache_write_5m"),
            (cache_write_1h, "cache_write_1h"),
            (cache_read, "cache_read"),
        ):
            if not tokens:
                continue
            price = getattr(self, f"long_price_{key}") if long else None
            if price is None:
                price = getattr(self, f"price_{key}")
            if price is None:
                return None
            total += tokens * price / 1_000_000
        return total


# --- name matching ---------------------------------------------------------------------

_DATE = re.compile(r"-(?:20\d{6}|20\d{2}-\d{2}-\d{2})$")  # -20250929, -2025-08-07
_OLD_DATE = re.compile(r"-\d{4}$")  # gpt-4-0613, gpt-3.5-turbo-0125
_BEDROCK = re.compile(r"^(?:[a-z]{2,6}\.)?(?:anthropic|openai|google|meta)\.")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")
_SUFFIX = re.compile(r"\[[0-9a-z]+\]$")  # Claude Code's "[1m]"


def _key(name: str) -> str:
    """Matching key: case, dots vs dashes and underscores do not matter."""
    return name.strip().lower().replace(".", "-").replace("_", "-")


def _forms(name: str) -> list[str]:
    """Keys to try for ``name``, most specific first."""
    n = name.strip().lower()
    m = _SUFFIX.search(n)
    suffix = m.group(0) if m else ""
    if m:
        n = n[: m.start()]
    n = n.rsplit("/", 1)[-1]  # provider/name, models/name
    n = _BEDROCK.sub("", n)
    n = _BEDROCK_VERSION.sub("", n)
    n = n.replace("@", "-")  # Vertex: claude-sonnet-4-5@20250929
    bases = [n]
    for pattern in (_DATE, re.compile(r"-latest$")):
        stripped = pattern.sub("", bases[-1])
        if stripped != bases[-1]:
            bases.append(stripped)
    stripped = _OLD_DATE.sub("", bases[-1])
    if stripped != bases[-1]:
        bases.append(stripped)
    forms = []
    for base in bases:
        if suffix:
            forms.append(_key(base + suffix))
    forms.extend(_key(b) for b in bases)  # "[1m]" on a model without a 1M entry
    return list(dict.fromkeys(forms))


# --- the data file ---------------------------------------------------------------------


def check_fields(where: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Validate and normalise one entry's fields (models.toml or a config override)."""
    out: dict[str, Any] = {}
    for k, v in entry.items():
        if k not in FIELDS:
            raise LookoutError(f"{where}: unknown field {k!r}")
        if k in _INT_FIELDS:
            if isinstance(v, str):
                v = parse_size(v)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise LookoutError(f"{where}: {k} must be a positive whole number, got {quoted(v)}")
        elif k in _PRICE_FIELDS:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise LookoutError(f"{where}: {k} must be a price of 0 or more, got {quoted(v)}")
            v = float(v)
        elif k == "cache_ttls":
            if not isinstance(v, (list, tuple)) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v
            ):
                raise LookoutError(f"{where}: cache_ttls must be a list of seconds, got {quoted(v)}")
            v = tuple(v)
        elif k == "aliases":
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                raise LookoutError(f"{where}: aliases must be a list of names, got {quoted(v)}")
            v = tuple(v)
        elif k == "encoding":
            from lookout_cli.tokens.tokenizer import ENCODINGS

            if v not in ENCODINGS:
                raise LookoutError(f"{where}: unknown encoding {v!r}")
        elif not isinstance(v, str):
            raise LookoutError(f"{where}: {k} must be text, got {quoted(v)}")
        out[k] = v
    return out


@dataclass(frozen=True)
class _Catalog:
    defaults: dict[str, Any]
    providers: dict[str, dict[str, Any]]
    entries: dict[str, dict[str, Any]]  # canonical name -> fields (bases resolved)
    index: dict[str, str]  # key -> canonical name


def _load_toml(text: str) -> _Catalog:
    import tomllib

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LookoutError(f"models.toml: {e}") from None
    defaults = check_fields("models.toml [defaults]", raw.get("defaults", {}))
    providers = {
        p: check_fields(f"models.toml [providers.{p}]", v)
        for p, v in raw.get("providers", {}).items()
    }
    own = {
        name: check_fields(f"models.toml [models.{name!r}]", v)
        for name, v in raw.get("models", {}).items()
    }

    def resolve(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        if name in seen:
            raise LookoutError(f"models.toml: base loop {' -> '.join(seen + (name,))}")
        entry = own.get(name)
        if entry is None:
            raise LookoutError(f"models.toml: {seen[-1]!r} has unknown base {name!r}")
        if "base" not in entry:
            return dict(entry)
        merged = {
            k: v for k, v in resolve(entry["base"], seen + (name,)).items() if k != "aliases"
        }
        merged.update({k: v for k, v in entry.items() if k != "base"})
        return merged

    entries = {name: resolve(name) for name in own}
    index: dict[str, str] = {}
    for name, entry in entries.items():
        if "provider" not in entry:
            raise LookoutError(f"models.toml: {name!r} has no provider")
        for alias in (name, *entry.get("aliases", ())):
            key = _key(alias)
            if index.get(key, name) != name:
                raise LookoutError(f"models.toml: {alias!r} names both {index[key]!r} and {name!r}")
            index[key] = name
    return _Catalog(defaults, providers, entries, index)


@lru_cache(maxsize=1)
def catalog() -> _Catalog:
    """The shipped models.toml, parsed once per process, and kept parsed in the cache folder
    under its sha256 (reading and checking the TOML took 10-15 ms of every command's run)."""
    from lookout_cli import data as shipped
    from lookout_cli.core import hashing
    from lookout_cli.core.fsutil import MARSHAL_TAG, kept_value
    from lookout_cli.core.paths import cache_folder

    text = shipped.read_bytes("models.toml")
    path = os.path.join(cache_folder(), f"models-{hashing.sha256(text).hexdigest()[:16]}-{MARSHAL_TAG}.marshal")
    values = kept_value(path, lambda: _astuple(_load_toml(text.decode("utf-8"))),
                        lambda kept: type(kept) is tuple and len(kept) == len(fields(_Catalog)))
    return _Catalog(*values)


def _astuple(parsed: _Catalog) -> tuple:
    import dataclasses  # (when the file is parsed again: its copies marshal the same every time)

    return dataclasses.astuple(parsed)


def known_models() -> list[str]:
    """Canonical names of every model in the data file."""
    return sorted(catalog().entries)


def _canonical(name: str, cat: _Catalog) -> str | None:
    for form in _forms(name):
        hit = cat.index.get(form)
        if hit is not None:
            return hit
    return None


def _guess_provider(name: str) -> str | None:
    n = name.strip().lower().rsplit("/", 1)[-1]
    n = _BEDROCK.sub("", n)
    if n.startswith("claude"):
        return "anthropic"
    if n.startswith("gemini"):
        return "gemini"
    if n.startswith(("gpt", "chatgpt", "codex")) or re.match(r"o\d", n):
        return "openai"
    return None


def _build(name: str, given: dict[str, Any], known: bool, label: str, cat: _Catalog) -> Model:
    from lookout_cli.tokens.tokenizer import encoding_for_model

    values = {**cat.defaults}
    provider = given.get("provider") or _guess_provider(name)
    values.update(cat.providers.get(provider or "", {}))
    values.update(given)
    values.pop("base", None)
    values["provider"] = provider
    values.setdefault("encoding", encoding_for_model(name))
    kwargs = {f.name: values[f.name] for f in fields(Model) if f.name in values}
    model = Model(name=name, known=known, label=label, **kwargs)
    if model.input_limit is not None and model.input_limit > model.context_window:
        raise LookoutError(
            f"model {name!r}: input_limit {model.input_limit} is over its context_window "
            f"{model.context_window}"
        )
    return model


def lookup(name: str | None, overrides: dict[str, dict[str, Any]] | None = None) -> Model:
    """The Model for ``name``, with ``overrides`` (config ``[models."name"]`` tables) applied.

    An override keyed by the model's canonical name, an alias or the exact name given
    changes those fields; an override for a name the data file lacks defines a new model.
    Unknown names get ``[defaults]``, ``known=False`` and a label saying so.
    """
    cat = catalog()
    given = (name or "").strip()
    canonical = _canonical(given, cat) if given else None

    extra: dict[str, Any] = {}
    if overrides:
        for key, fields in overrides.items():
            if not isinstance(fields, dict):
                raise LookoutError(f"config: models.{key} must be a table of fields")
            matches = (canonical is not None and _canonical(key, cat) == canonical) or (
                bool(given) and (_key(key) == _key(given) or _key(key) in _forms(given))
            )
            if matches:
                extra.update(check_fields(f"config: models.{key}", fields))
        extra.pop("aliases", None)

    if "base" in extra:  # a config model built on a known one: base = "claude-sonnet-4-5"
        base = _canonical(extra.pop("base"), cat)
        if base is None:
            raise LookoutError(f"config: model {given!r} has an unknown base model")
        if canonical is None:
            fields = {**cat.entries[base], **extra}
            fields.pop("aliases", None)
            return _build(given, fields, True, f"{given} (from config, based on {base})", cat)
    if canonical is not None:
        fields = {**cat.entries[canonical], **extra}
        label = canonical + (" (with config overrides)" if extra else "")
        return _build(canonical, fields, True, label, cat)
    if extra and "context_window" in extra:
        return _build(given, extra, True, f"{given} (from config)", cat)
    window = extra.get("context_window", cat.defaults.get("context_window"))
    output = extra.get("max_output", cat.defaults.get("max_output"))
    what = f"unknown model {given!r}" if given else "no model named"
    label = f"{what}: assuming a {window:,}-token window and {output:,} output tokens"
    if not extra.get("price_input"):
        label += ", no prices"
    return _build(given or "unknown", extra, False, label, cat)
