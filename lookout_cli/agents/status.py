"""The status line: the meter in one line, from the end of a running session's transcript.

Claude Code runs its ``statusLine`` command after every assistant message with the session's
JSON on standard input (``transcript_path``, ``model``, ``cost``, ``context_window``...). A
long session's file is hundreds of megabytes, so this reads it backwards from the end up to
the last line that records the provider's usage (the prompt and output it counted), the same
figure ``measure`` starts from, and estimates what was added after it from its characters.
Nothing here loads click, the adapters or the tokenizer: the window, summary point and meter
thresholds for a model under the current configuration are worked out once with the full
machinery (``figures``) and kept in the cache folder, keyed by everything they depend on.

Formats read: Claude Code sessions (``message.usage`` of an assistant line, a
``compact_boundary`` after it) and Codex rollouts (``token_count`` events, ``compacted``).
"""

from __future__ import annotations

import datetime as dt
import json
import marshal
import os
import sys

from lookout_cli import __version__
from lookout_cli.core.paths import cache_folder
from lookout_cli.meter.replay import config_stamps

# orjson is not imported: its import alone (dataclasses, inspect, json) took 30 ms; the few
# lines read here parse as fast with the standard library's decoder
_loads = json.loads

BLOCK = 1 << 18  # read backwards this much at a time
TAIL_LIMIT = 64 << 20  # never read more than this of a file's end
CHARS_PER_TOKEN = 4  # what was added after the last usage, estimated (measure counts it)
CACHE_TIERS = {"5m": 300, "1h": 3600}  # meter.cost.CACHE_TIERS, not imported on the hot path
SCHEMA = 2  # 2: the hidden level kept with the figures
COLOURS = {"amber": "\x1b[33m", "red": "\x1b[31m", "normal": "", "hidden": "\x1b[2m"}
RESET = "\x1b[0m"
USAGE_NEEDLES = (b'"usage"', b'"token_count"')
COMPACTION_NEEDLES = (b'"compact_boundary"', b'"type":"compacted"', b'"type": "compacted"')


class Tail:
    """What the end of a transcript says: the last usage and what came after it."""

    def __init__(self) -> None:
        self.format: str | None = None
        self.model: str | None = None
        self.window: int | None = None  # a window the transcript records (Codex)
        self.prompt = 0
        self.output = 0
        self.cache_write = 0
        self.cache_write_1h = 0
        self.timestamp: str | None = None
        self.found = False
        self.compacted_after = False  # a compaction after the last usage: its count is stale
        self.after_compaction: int | None = None  # the size the agent recorded for it (Claude Code)
        self.pending_chars = 0

    @property
    def known(self) -> bool:
        """Whether the context's size is known: a usage, and no compaction after it but one
        whose size the agent recorded."""
        return self.found and (not self.compacted_after or self.after_compaction is not None)

    @property
    def used(self) -> int:
        base = self.after_compaction if self.compacted_after else self.prompt + self.output
        return (base or 0) + self.pending_chars // CHARS_PER_TOKEN


def _int(value) -> int:
    return value if type(value) is int and value > 0 else 0


def _usage_line(obj: dict, tail: Tail) -> bool:
    """Whether ``obj`` records the provider's usage (then ``tail`` holds it)."""
    if obj.get("type") == "assistant":  # Claude Code
        message = obj.get("message")
        usage = message.get("usage") if isinstance(message, dict) else None
        if (not isinstance(usage, dict) or obj.get("isSidechain") is True or obj.get("isApiErrorMessage") is True
                or message.get("model") == "<synthetic>"):
            return False
        uncached, write, read = (_int(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens",
                                                               "cache_read_input_tokens"))
        output = _int(usage.get("output_tokens"))
        if uncached + write + read + output == 0:
            return False
        creation = usage.get("cache_creation")
        tail.format, tail.model = "claude-code", message.get("model") if isinstance(message.get("model"), str) else None
        tail.prompt, tail.output, tail.cache_write = uncached + write + read, output, write
        tail.cache_write_1h = _int(creation.get("ephemeral_1h_input_tokens")) if isinstance(creation, dict) else 0
    elif obj.get("type") == "event_msg":  # Codex
        payload = obj.get("payload")
        info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict):
            return False
        inp, cached, written, out = (_int(last.get(k)) for k in ("input_tokens", "cached_input_tokens",
                                                                 "cache_write_input_tokens", "output_tokens"))
        if not (inp or cached or written or out):
            return False
        tail.format = "codex"
        # Codex's input_tokens include the cached part (formats.codex)
        tail.prompt, tail.output, tail.cache_write = max(inp - cached - written, 0) + cached + written, out, written
        tail.window = _int(info.get("model_context_window")) or None
    else:
        return False
    tail.found = True
    timestamp = obj.get("timestamp")
    tail.timestamp = timestamp if isinstance(timestamp, str) else None
    return True


def _strings(value, limit: int = 1 << 22) -> int:
    """Characters of the text in a JSON value (what the model will read of it), roughly."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_strings(v) for v in value)
    if isinstance(value, dict):
        if value.get("type") in ("image", "input_image"):
            return 0
        return sum(_strings(v) for k, v in value.items() if k not in ("id", "tool_use_id", "call_id", "type",
                                                                     "signature", "source"))
    return 0


def _pending(obj: dict) -> int:
    """Characters a line after the last usage adds to the next request."""
    kind = obj.get("type")
    if kind in ("user", "assistant") and obj.get("isSidechain") is not True and obj.get("isMeta") is not True:
        message = obj.get("message")
        return _strings(message.get("content")) if isinstance(message, dict) else 0
    if kind == "response_item":
        payload = obj.get("payload")
        if isinstance(payload, dict) and payload.get("type") != "reasoning":
            return _strings({k: v for k, v in payload.items() if k in ("content", "output", "arguments")})
    return 0


def read_tail(path: str, limit: int = TAIL_LIMIT) -> Tail:
    """The last usage of ``path`` and what came after it, reading from the end."""
    tail = Tail()
    after: list[bytes] = []  # lines after the last usage, newest first
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        position, carry, read = end, b"", 0
        while position > 0 and read < limit and not tail.found:
            size = min(BLOCK, position)
            position -= size
            handle.seek(position)
            block = handle.read(size) + carry
            read += size
            lines = block.split(b"\n")
            carry = lines.pop(0) if position > 0 else b""  # may be cut: read with the block before
            for line in reversed(lines):
                if _tail_line(line, tail, after):
                    break
        if not tail.found and carry:
            _tail_line(carry, tail, after)
    if tail.found:
        since = after  # newest first: the lines after the last compaction, if any
        for n, line in enumerate(after):
            if any(needle in line for needle in COMPACTION_NEEDLES):
                try:
                    obj = _loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and (obj.get("subtype") == "compact_boundary" or obj.get("type") == "compacted"):
                    tail.compacted_after = True
                    meta = obj.get("compactMetadata")
                    post = meta.get("postTokens") if isinstance(meta, dict) else None
                    tail.after_compaction = post if type(post) is int and post > 0 else None
                    since = after[:n]
                    break
        for line in since:
            try:
                obj = _loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                tail.pending_chars += _pending(obj)
    return tail


def _tail_line(line: bytes, tail: Tail, after: list[bytes]) -> bool:
    if not line.strip():
        return False
    if any(n in line for n in USAGE_NEEDLES):
        try:
            obj = _loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and _usage_line(obj, tail):
            return True
    after.append(line)
    return False


# --- the model's figures under the configuration, kept in the cache -----------------------------

def _key(model: str | None, window: int | None, stated: int | None) -> str:
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("LOOKOUT_") or k == "XDG_CONFIG_HOME")
    return repr((SCHEMA, __version__, model, window, stated, env, config_stamps(os.getcwd())))


def figures(model: str | None, window: int | None, stated: int | None = None) -> dict:
    """Budget, summary point, compaction point, meter thresholds and cache TTL for ``model``
    as ``measure`` works them out under the current configuration (the flags it has aside).
    ``stated`` is the window the agent reports, used for a model the models file does not know."""
    where = os.path.join(cache_folder(), "state", "statusline.bin")
    try:
        key = _key(model, window, stated)
    except OSError:  # no working folder
        key = None
    try:
        with open(where, "rb") as handle:
            kept = marshal.load(handle)
        if key is not None and kept.get(key) is not None:
            return kept[key]
    except (OSError, EOFError, ValueError, TypeError, AttributeError):
        kept = {}
    found = _work_out(model, window, stated)
    if key is not None:
        try:
            from lookout_cli.core.fsutil import atomic_write

            kept = dict(list(kept.items())[-31:]) if isinstance(kept, dict) else {}
            kept[key] = found
            atomic_write(where, marshal.dumps(kept), cache=True)
        except (OSError, ValueError):
            pass  # a cache that cannot be written only costs speed
    return found


def _work_out(model: str | None, window: int | None, stated: int | None) -> dict:
    from lookout_cli.config import Config
    from lookout_cli.core.units import setting_number as _number
    from lookout_cli.meter.analysis import (
        DEFAULT_AMBER,
        HIDDEN_BELOW,
        Settings,
        budget_figures,
        lookup_model,
        model_ttl,
    )

    config = Config()
    settings = Settings(model=config.get("measure.model") or config.get("model"), budget=config.get("budget"),
                        amber=_number(config.get("meter.amber"), "meter.amber"), red=_number(config.get("meter.red"), "meter.red"),
                        models_config=config.get("models"),
                        threshold_percent=_number(config.get("compaction.threshold_percent"), "compaction.threshold_percent"),
                        reserved=_number(config.get("compaction.reserved"), "compaction.reserved"))
    name = settings.model or model
    info = lookup_model(name, settings.models_config)
    budget = budget_figures(info, window or (None if info.known else stated), settings, 0)
    red = settings.red if settings.red is not None else (
        round(100 * budget.summary_point / budget.budget, 3) if budget.budget else 100.0)
    return {"model": name, "budget": budget.budget, "summary_point": budget.summary_point, "due_at": budget.due_at,
            "amber": float(settings.amber if settings.amber is not None else DEFAULT_AMBER), "red": float(red),
            "hidden": HIDDEN_BELOW, "ttl": model_ttl(info)}


# --- the line -----------------------------------------------------------------------------------

def state(percent: float, fig: dict) -> str:
    """The meter's state (meter.analysis.meter_state, with its hidden level)."""
    if percent >= fig["red"]:
        return "red"
    if percent >= fig["amber"]:
        return "amber"
    return "hidden" if percent < fig["hidden"] else "normal"


def tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}".rstrip("0").rstrip(".") + "M"
    if n >= 1000:
        return f"{round(n / 1000)}k"
    return str(n)


def warm_left(tail: Tail, ttl: int | None, now: dt.datetime) -> int | None:
    """Seconds the prompt cache stays warm after the last response (meter.cost.warm_cache)."""
    if not tail.timestamp:
        return None
    try:
        at = dt.datetime.fromisoformat(tail.timestamp)
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    if tail.cache_write:
        seconds = CACHE_TIERS["1h" if tail.cache_write_1h else "5m"]
    elif ttl:
        seconds = CACHE_TIERS["1h" if ttl >= 3600 else "5m"]
    else:
        return None
    return int((at + dt.timedelta(seconds=seconds) - now).total_seconds())


def reading(tail: Tail, fig: dict) -> dict:
    """The status line's figures (also what ``hook`` warns from)."""
    used = tail.used
    percent = 100 * used / fig["budget"] if fig["budget"] else 0.0
    return {"percent": percent, "used": used, "state": state(percent, fig), "due": used >= fig["due_at"],
            "known": tail.known}


def line(tail: Tail, fig: dict, cost: float | None, now: dt.datetime, colour: bool) -> str:
    """One line: percent in the meter's colour, tokens of the window, the summary point,
    warm-cache time left and cost."""
    parts = []
    if not tail.found:
        parts.append(f"no usage yet · {tokens(fig['budget'])} window")
    elif not tail.known:
        parts.append(f"compacted · summary at {tokens(fig['summary_point'])}")
    else:
        r = reading(tail, fig)
        head = f"{r['percent']:.0f}%" if r["state"] != "hidden" else ""
        words = f"{tokens(r['used'])}/{tokens(fig['budget'])}"
        if colour and COLOURS[r["state"]]:
            head = f"{COLOURS[r['state']]}{head or words}{RESET}" + (f" {words}" if head else "")
        else:
            head = f"{head} {words}".strip()
        parts.append(head)
        parts.append("compaction due" if r["due"] else f"summary at {tokens(fig['summary_point'])}")
    left = warm_left(tail, fig.get("ttl"), now) if tail.found else None
    if left is not None:
        parts.append(f"cache {left // 60}m{left % 60:02d}s" if left > 0 else "cache cold")
    if cost is not None:
        parts.append(f"${cost:.2f}")
    return " · ".join(parts)


def _payload() -> dict:
    try:
        if os.isatty(0):
            return {}
        data = sys.stdin.buffer.read(4 << 20)
        obj = _loads(data) if data.strip() else {}
        return obj if isinstance(obj, dict) else {}
    except (OSError, ValueError):
        return {}


def main(args: list[str]) -> int | None:
    """``lookout statusline [FILE] [--color always|never|auto]`` without click; None when the
    arguments are for the full command (``--help``, unknown options)."""
    path, colour = None, None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in ("--color", "--colour") and rest:
            colour = rest.pop(0)
        elif arg.startswith("--color="):
            colour = arg.partition("=")[2]
        elif arg.startswith("-") or path is not None:
            return None
        else:
            path = arg
    if colour not in (None, "auto", "always", "never"):
        return None
    payload = _payload()
    path = path or payload.get("transcript_path")
    colour_on = colour == "always" or (colour in (None, "auto") and not os.environ.get("NO_COLOR"))
    cost = payload.get("cost", {}).get("total_cost_usd") if isinstance(payload.get("cost"), dict) else None
    model = payload.get("model", {}).get("id") if isinstance(payload.get("model"), dict) else None
    try:
        tail = read_tail(path) if isinstance(path, str) and path else Tail()
    except FileNotFoundError:
        tail = Tail()  # a new session's file is written with its first message
    except OSError as exc:
        _out(f"lookout: {exc.strerror or exc}")
        return 0
    try:
        fig = figures(tail.model or model, tail.window, _agent_window(payload))
        text = line(tail, fig, cost if isinstance(cost, (int, float)) else None,
                    dt.datetime.now(dt.UTC), colour_on)
    except Exception as exc:  # noqa: BLE001 - a status line never fails its agent: one short line instead
        text = f"lookout: {type(exc).__name__}: {exc}"[:200]
    _out(text)
    return 0


def _agent_window(payload: dict) -> int | None:
    """The window the agent states (Claude Code's ``context_window.context_window_size``):
    it knows models that the models file does not yet."""
    info = payload.get("context_window")
    return _int(info.get("context_window_size")) or None if isinstance(info, dict) else None


def _out(text: str) -> None:
    try:
        os.write(1, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
