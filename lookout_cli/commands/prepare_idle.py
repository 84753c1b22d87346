"""``lookout prepare-idle``: before a quiet chat's prompt cache runs out, summarize it while
reading it is still cheap, and plan the keep-warm reads that cost less than sending it again."""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import click
import orjson

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.errors import CheckFailed, LookoutError
from lookout_cli.core.times import parse_time
from lookout_cli.flags import filter_options
from lookout_cli.options import Run, report_json, write_stdout

MODES = ("prepare", "compact", "off")
DEFAULT_HOOK_TIMEOUT = 120.0

EPILOG = """\b
Examples:
  lookout prepare-idle session.jsonl > /dev/null        # prepare a summary if it is time
  lookout prepare-idle --json --now 2026-11-29T10:04:10Z session.jsonl | jq .plan.expires
  lookout prepare-idle --mode compact -i session.jsonl  # compact in the window instead
  lookout prepare-idle --on-ping ~/bin/keep-warm --on-prepare 'notify-send "summary ready"' s.jsonl
  lookout prepare-idle s.jsonl > /dev/null; lookout compact --force -i s.jsonl  # back after expiry
  lookout prepare-idle < chat.jsonl | lookout measure --report-only   # the plan, then the meter

\b
From cron, every minute, for the chats active in the last 70 minutes (one line in crontab -e;
cron's one-minute step needs wider windows than the defaults of 60 and 30 seconds):
  * * * * * find ~/.claude/projects -name '*.jsonl' -mmin -70 -exec lookout prepare-idle -q --lead 150 --ping-margin 90 {} ';' >/dev/null

\b
From a systemd user timer every 20 seconds, keeping caches warm through a script of yours
(keep-warm reads can run for hours on the 1-hour tier, hence -mmin -1200):
  # ~/.config/systemd/user/lookout-idle.service
  [Service]
  Type=oneshot
  ExecStart=/bin/sh -c 'find %h/.claude/projects -name "*.jsonl" -mmin -1200 -exec lookout prepare-idle -q --on-ping %h/bin/keep-warm {} ";" >/dev/null'
  # ~/.config/systemd/user/lookout-idle.timer
  [Timer]
  OnBootSec=1min
  OnUnitActiveSec=20s
  AccuracySec=1s
  [Install]
  WantedBy=timers.target
  # then: systemctl --user enable --now lookout-idle.timer

\b
The timeline: a chat of 100,000 tokens or more (the last response's prompt and output as the
provider counted them, estimated when no usage is recorded) stays cached 5 minutes or 1 hour
after its last response (the tier its cache writes used, else idle.cache_ttl, else the
model's, else 5 minutes), or until the provider's daily reset (idle.daily_resets) if that
comes first. The summary is written in the last --lead seconds before then (prepare mode:
kept aside, and `lookout compact` starts from it if you come back after expiry; compact
mode: the transcript is compacted, as `lookout compact --force` would, then or at the first
run after expiry). If the chat moved on since a summary was prepared, it is dropped.

\b
Keep-warm reads: a read costs 0.1x the input price, sending the chat again cold costs the
cache write price (1.25x for 5 minutes, 2x for 1 hour; the models file's prices), so up to
12 (5m) or 19 (1h) reads cost less than one cold resend; none is planned across a daily
reset. With --on-ping CMD, CMD runs when a read is due (the last --ping-margin seconds
before expiry), once a run, with the plan JSON on standard input and LOOKOUT_TRANSCRIPT,
LOOKOUT_SESSION, LOOKOUT_CHAT_MODEL, LOOKOUT_TIER, LOOKOUT_TOKENS, LOOKOUT_EXPIRES,
LOOKOUT_NOW, LOOKOUT_READS_LEFT, LOOKOUT_PING_COST and LOOKOUT_COLD_COST set; lookout
records the read, and the summary waits until no read is left. --on-prepare CMD runs after a
summary is prepared (or the chat compacted), with the summary file as its last argument
and in LOOKOUT_SUMMARY_FILE. Hooks run through sh; --dry-run and --check only report them.

\b
Reads the whole transcript (the summary needs every turn); the transcript passes through
byte for byte except in compact mode. Config keys: idle.mode, idle.cache_ttl,
idle.daily_resets (a list of "HH:MM" UTC, or a table of lists by provider), idle.min_tokens,
idle.lead, idle.ping_margin, idle.on_ping, idle.on_prepare, idle.hook_timeout, and compact's
compaction.* keys for the summary.

\b
Exit status: 0 done or nothing to do; 1 --check and something would be done; 2 an error,
including a hook that failed (its last line of standard error is shown).
"""


@click.command(epilog=EPILOG)
@click.option("--mode", type=click.Choice(MODES),
              help="prepare: keep a summary aside; compact: compact in the window; off: pass through "
                   "[default: prepare; config: idle.mode].")
@click.option("--now", "now_text", metavar="ISO", help="The time to plan from (default: the clock).")
@click.option("--cache-ttl", type=click.Choice(["5m", "1h"]),
              help="The cache tier when the usage records do not say [config: idle.cache_ttl; default: the model's, else 5m].")
@click.option("--daily-reset", "daily_resets", multiple=True, metavar="HH:MM",
              help="A daily time (UTC) the provider's cache empties; repeat for several [config: idle.daily_resets].")
@click.option("--min-tokens", type=click.IntRange(0), metavar="N",
              help="Leave smaller chats alone [default: 100000; config: idle.min_tokens].")
@click.option("--lead", type=click.FloatRange(0), metavar="SECONDS",
              help="Write the summary this long before the cache runs out [default: 60; config: idle.lead].")
@click.option("--ping-margin", type=click.FloatRange(1), metavar="SECONDS",
              help="Make a keep-warm read this long before the cache runs out [default: 30; config: idle.ping_margin].")
@click.option("--on-ping", metavar="CMD", help="Run CMD when a keep-warm read is due [config: idle.on_ping].")
@click.option("--on-prepare", metavar="CMD", help="Run CMD after a summary is prepared [config: idle.on_prepare].")
@click.option("--hook-timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="Give up on a hook after this long [default: 120; config: idle.hook_timeout].")
@click.option("--json", "json_out", is_flag=True,
              help="Print the JSON report on standard output instead of the transcript.")
@click.option("--model", "model_name", metavar="NAME",
              help="The chat's model, for its prices and cache tier (default: the transcript's) [config: model].")
@click.option("--max-tokens", "--budget", "budget", metavar="SIZE",
              help="The context budget, as for compact [config: budget].")
@click.option("--instructions", metavar="TEXT", help="What the summary must keep in full detail.")
@click.option("--summarizer", metavar="SPEC",
              help="embedded, command:'CMD', openai or anthropic, as for compact [config: compaction.summarizer].")
@click.option("--summary-model", metavar="NAME", help="The model that writes the summary [config: compaction.model].")
@click.option("--summary-url", metavar="URL", help="The summarizer's base URL [config: compaction.base_url].")
@click.option("--summary-key-env", metavar="VAR",
              help="The variable holding its API key [config: compaction.api_key_env].")
@click.option("--summary-timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="Give up on the summarizer after this long [default: 300; config: compaction.timeout].")
@filter_options(side_effects=True)
def prepare_idle(run: Run, mode, now_text, cache_ttl, daily_resets, min_tokens, lead, ping_margin, on_ping,
                 on_prepare, hook_timeout, json_out, model_name, budget, instructions, summarizer, summary_model,
                 summary_url, summary_key_env, summary_timeout) -> None:
    """Before a quiet chat's prompt cache runs out, summarize it while reading it is still cheap.

    For a chat of 100,000 tokens or more that has gone quiet, works out when the provider's
    cache runs out (the last response's time and cache tier, and the provider's daily resets),
    and shortly before then writes a summary through compact's summarizers. In prepare mode
    (the default) the summary is kept aside and the transcript passes through unchanged;
    `lookout compact` starts from it if you come back after the cache ran out, and it is
    dropped if the chat moved on sooner. In compact mode the chat is compacted in that window
    (or, if it was missed, once the cache has run out); off passes it through. It plans keep-warm reads (how many cost less than sending the chat
    again, never across a daily reset) and reports the cost of coming back cold; --on-ping and
    --on-prepare let a scheduler or agent wrapper act on the plan.
    """

    mode = str(run.setting("idle.mode", mode, "prepare")).strip().lower()
    if mode not in MODES:
        raise LookoutError(f"idle.mode: {mode!r} is not prepare, compact or off")
    if json_out and run.output in (None, "-") and not run.in_place and mode == "compact":
        raise click.UsageError("--json with --mode compact needs -o FILE or -i (the compacted transcript "
                               "has nowhere else to go)")
    if json_out and run.output == "-":
        raise click.UsageError("--json prints the report on standard output: use -o FILE for the transcript")
    now = dt.datetime.now(dt.timezone.utc)
    if now_text:
        now = parse_time(now_text)
        if now is None:
            raise click.UsageError(f"--now: {now_text!r} is not an ISO time like 2026-11-29T10:04:00Z")
    settings = _Settings.read(run, mode, cache_ttl, daily_resets, min_tokens, lead, ping_margin, on_ping,
                              on_prepare, hook_timeout)
    transcript = run.load()
    idle = _Idle(run, transcript, settings, now, model_name)
    idle.compact_flags = dict(budget=budget, instructions=instructions, summarizer=summarizer,
                              summary_model=summary_model, summary_url=summary_url,
                              summary_key_env=summary_key_env, summary_timeout=summary_timeout)
    idle.decide()
    _output(run, transcript, idle, json_out)


# --- settings -------------------------------------------------------------------------------------

@dataclass
class _Settings:
    mode: str
    cache_ttl: str | None
    resets: object  # list of "HH:MM", or {provider: [...]}
    min_tokens: int
    lead: dt.timedelta
    margin: dt.timedelta
    on_ping: str | None
    on_prepare: str | None
    hook_timeout: float

    @classmethod
    def read(cls, run: Run, mode, cache_ttl, daily_resets, min_tokens, lead, ping_margin, on_ping, on_prepare,
             hook_timeout) -> _Settings:
        from lookout_cli.compaction import idle_plan

        ttl = run.setting("idle.cache_ttl", cache_ttl)
        if ttl is not None:
            ttl = _tier_of(ttl)
        resets = list(daily_resets) if daily_resets else run.setting("idle.daily_resets", None, [])
        if isinstance(resets, str):
            resets = [part for part in resets.replace(",", " ").split() if part]
        return cls(
            mode=mode,
            cache_ttl=ttl,
            resets=resets,
            min_tokens=run.number("idle.min_tokens", min_tokens, idle_plan.MIN_TOKENS, int, minimum=0),
            lead=dt.timedelta(seconds=run.number("idle.lead", lead, idle_plan.PREPARE_LEAD.total_seconds(), minimum=0)),
            margin=dt.timedelta(seconds=run.number("idle.ping_margin", ping_margin,
                                                   idle_plan.PING_MARGIN.total_seconds(), minimum=0)),
            on_ping=run.setting("idle.on_ping", on_ping) or None,
            on_prepare=run.setting("idle.on_prepare", on_prepare) or None,
            hook_timeout=run.number("idle.hook_timeout", hook_timeout, DEFAULT_HOOK_TIMEOUT, minimum=0),
        )

    def resets_for(self, provider: str | None) -> list[str]:
        from lookout_cli.compaction import idle_plan

        resets = self.resets
        if isinstance(resets, dict):
            resets = resets.get(provider or "", resets.get("default", []))
        if isinstance(resets, str):
            resets = [resets]
        if not isinstance(resets, list):
            raise LookoutError(f"idle.daily_resets: {resets!r} is not a list of times like [\"07:00\"]")
        for text in resets:
            try:
                idle_plan.parse_reset(text)
            except ValueError as exc:
                raise LookoutError(f"idle.daily_resets: {exc}") from None
        return [str(t).strip() for t in resets]


def _tier_of(value) -> str:
    text = str(value).strip().lower()
    if text in ("5m", "5min", "300", "300s"):
        return "5m"
    if text in ("1h", "60m", "3600", "3600s"):
        return "1h"
    raise LookoutError(f"idle.cache_ttl: {value!r} is not 5m or 1h")


def _compact_options(run: Run, model_name, budget, instructions, now: dt.datetime):
    """The options ``lookout compact`` would use now (the same config keys), forced."""
    from lookout_cli.commands.compact import options_from_run

    return options_from_run(run, force=True, instructions=instructions, on_failure="stop",
                            model_name=model_name, budget=budget, now=now)


# --- the chat ---------------------------------------------------------------------------------------

@dataclass
class _Chat:
    tokens: int
    basis: str  # "provider" (the last response's usage) or "estimated"
    last_response: dt.datetime | None
    model: object  # lookout_cli.tokens.models.Model
    tier: str
    tier_source: str  # recorded | config | model | default


def _read_chat(view, settings: _Settings, model_name: str | None, models_config) -> _Chat:
    from lookout_cli.meter import analysis as meter
    from lookout_cli.meter.cost import cache_tier
    from lookout_cli.tokens.models import lookup

    usage = view.usages[-1] if view.usages else None
    name = model_name or view.model or (usage.model if usage else None)
    model = lookup(name, models_config)
    if usage is not None and meter.stale_reason(view, meter.locate(view, usage)) is None:
        tokens, basis = usage.prompt + usage.output, "provider"
    else:  # no usage, or it predates a compaction or a clearing: estimate what the chat holds now
        from lookout_cli.tokens.tokenizer import estimate

        tokens, basis = sum(estimate(item.text) for item in view.items if item.text), "estimated"
    when = parse_time(usage.timestamp) if usage is not None else None
    if when is None:
        stamps = [i.timestamp for i in view.items if i.role == "assistant" and i.timestamp]
        when = parse_time(stamps[-1]) if stamps else parse_time(view.last_timestamp)
    recorded = cache_tier(view.usages, None)
    if recorded is not None and recorded[1] == "recorded":
        tier, source = recorded
    elif settings.cache_ttl:
        tier, source = settings.cache_ttl, "config"
    elif meter.model_ttl(model):
        tier, source = ("1h" if meter.model_ttl(model) >= 3600 else "5m"), "model"
    else:
        tier, source = "5m", "default"
    return _Chat(tokens, basis, when, model, tier, source)


def _prices(model, tokens: int):
    """The model's prices for a prompt this size (long-context rates past its threshold)."""
    from lookout_cli.compaction.idle_plan import Prices

    long = model.long_context_threshold is not None and tokens > model.long_context_threshold

    def price(key: str):
        value = getattr(model, f"long_price_{key}") if long else None
        return value if value is not None else getattr(model, f"price_{key}")

    if price("input") is None:
        return None
    return Prices(input=price("input"), cache_read=price("cache_read"), cache_write_5m=price("cache_write_5m"),
                  cache_write_1h=price("cache_write_1h"))


# --- what to do ----------------------------------------------------------------------------------

class _Idle:
    """One run: the plan, what was done (or would be), the hooks and the report."""

    def __init__(self, run: Run, transcript, settings: _Settings, now: dt.datetime, model_name: str | None):
        self.run = run
        self.transcript = transcript
        self.settings = settings
        self.now = now
        self.model_name = model_name
        self.compact_flags: dict = {}
        self.plan = None
        self.chat: _Chat | None = None
        self.action = "none"
        self.changes = 0
        self.lines: list[str] = []
        self.hooks: list[dict] = []
        self.error: str | None = None
        self.report: dict = {"command": "prepare-idle", "mode": settings.mode, "transcript": transcript.source,
                             "now": _iso(now)}
        self.compaction = None

    # --- saying ---
    def say(self, text: str) -> None:
        self.lines.append(text)
        self.run.say(text)

    def verb(self, doing: str, would: str) -> str:
        return would if self.run.dry_run else doing

    # --- deciding ---
    def decide(self) -> None:
        from lookout_cli.compaction import idle_plan, prepared

        run, transcript, s = self.run, self.transcript, self.settings
        if s.mode == "off":
            self.say("prepare-idle: off (idle.mode = off): the chat passes through as it is")
            return
        if transcript.adapter is None or not transcript.lines:
            self.say("prepare-idle: nothing to plan (no transcript in a known format)")
            return
        view = transcript.view()
        self.report["session"] = view.session_id
        if prepared.is_stale(transcript):
            prepared.drop(transcript, run.dry_run)
            self.changes += 1
            self.report["dropped"] = True
            self.say("prepare-idle: the chat moved on since a summary was prepared: "
                     + self.verb("dropped it", "would drop it (dry run)"))
        prepared.forget_reads(transcript, run.dry_run)
        chat = self.chat = _read_chat(view, s, self.run.setting("model", self.model_name),
                                      run.setting("models", None, None))
        self.report["chat"] = {"tokens": chat.tokens, "basis": chat.basis, "model": chat.model.name,
                               "model_known": chat.model.known, "provider": chat.model.provider,
                               "tier": chat.tier, "tier_source": chat.tier_source}
        if chat.last_response is None:
            self.action = "unknown"
            self.say("prepare-idle: the transcript records no response time, so when its cache runs out is "
                     "unknown: nothing to do")
            return
        resets = s.resets_for(chat.model.provider)
        self.plan = idle_plan.plan(chat.tokens, chat.last_response, self.now, chat.tier,
                                   _prices(chat.model, chat.tokens), resets, s.min_tokens, s.lead,
                                   reads=prepared.reads(transcript), margin=s.margin)
        self.report["plan"] = self.plan.to_dict()
        self._describe()
        getattr(self, f"_{self.plan.state}")()

    def _small(self) -> None:
        self.action = "none"
        self.say(f"  under {self.settings.min_tokens:,} tokens: cheap to send again, nothing to do")

    def _waiting(self) -> None:
        self._warm_or(lambda: self.say(f"  nothing to do yet: the summary is written from "
                                       f"{_clock(self._summary_at())} ({_until(self._summary_at(), self.now)})"))

    def _prepare(self) -> None:
        self._warm_or(self._act)

    def _expired(self) -> None:
        from lookout_cli.compaction import prepared

        p = self.plan
        kept = prepared.find(self.run.store, self.transcript)
        if self.settings.mode == "compact":
            self._act()
            return
        if kept is not None:
            self.action = "ready"
            self.report["prepared"] = _prepared_dict(kept)
            self.say(f"  the cache ran out at {_clock(p.expires)}; `lookout compact` starts from the summary "
                     f"prepared at {kept.created} (add --force to compact before it is due)")
        else:
            self.action = "none"
            cost = f" (${p.cold_cost:.4f} at API prices)" if p.cold_cost is not None else ""
            self.say(f"  the cache ran out at {_clock(p.expires)} with no summary prepared: the next message "
                     f"sends the whole chat again{cost}")

    def _summary_at(self) -> dt.datetime:
        p = self.plan
        return p.summary_at if self.settings.on_ping and p.pings else p.prepare_at

    def _warm_or(self, otherwise) -> None:
        """Keep the cache warm while reads are worth it (with --on-ping), else ``otherwise``."""
        p = self.plan
        if not (self.settings.on_ping and p.pings):
            otherwise()
            return
        if not p.ping_due:
            self.action = "none"
            self.say(f"  next keep-warm read at {_clock(p.pings[0])} ({_until(p.pings[0], self.now)}); "
                     f"the summary waits until {_clock(p.summary_at)}")
            return
        self.action = "ping"
        self.changes += 1
        ok = self._hook("on-ping", self.settings.on_ping, [])
        if ok and not self.run.dry_run:
            from lookout_cli.compaction import prepared

            prepared.record_read(self.transcript, self.now)
        if ok:
            self.say(f"  keep-warm read {self.verb('made', 'would be made')} ({p.reads_made + 1} of "
                     f"{p.max_pings}); the cache stays warm until about {_clock(self.now + _ttl(p.tier))}")
        elif p.state == "prepare":
            self.say("  the keep-warm read failed: writing the summary instead")
            self._act()

    def _act(self) -> None:
        if self.settings.mode == "compact":
            self._compact()
        else:
            self._prepare_summary()

    def _summarizer(self):
        from lookout_cli.compaction import summarizers

        f, run = self.compact_flags, self.run
        try:
            return summarizers.make(run.setting("compaction.summarizer", f.get("summarizer")),
                                    run.setting("compaction.model", f.get("summary_model")),
                                    run.setting("compaction.base_url", f.get("summary_url")),
                                    run.setting("compaction.api_key_env", f.get("summary_key_env")),
                                    run.setting("compaction.timeout", f.get("summary_timeout")),
                                    run.setting("compaction.summary_context_window", None))
        except summarizers.SummaryFailed as exc:
            raise click.UsageError(str(exc)) from None

    def _options(self):
        return _compact_options(self.run, self.model_name, self.compact_flags.get("budget"),
                                self.compact_flags.get("instructions"), self.now)

    def _prepare_summary(self) -> None:
        from lookout_cli.compaction import engine as compactor
        from lookout_cli.compaction import prepared

        run, p = self.run, self.plan
        kept = prepared.find(run.store, self.transcript)
        if kept is not None:
            self.action = "ready"
            self.report["prepared"] = _prepared_dict(kept)
            self.say(f"  a summary was already prepared at {kept.created}; the cache runs out at "
                     f"{_clock(p.expires)}, then `lookout compact` starts from it")
            return
        writer = self._summarizer()
        try:
            note = compactor.prepare_summary(self.transcript, self._options(), run.store, writer)
        except LookoutError as exc:
            self.action = "failed"
            self.error = f"prepare-idle: no summary was prepared: {exc.format_message()}"
            return
        if note is None:
            self.action = "none"
            self.say("  nothing to summarize (the earlier turns are too short to be worth a note)")
            return
        prepared.save(run.store, self.transcript, note.text, _iso(p.expires), note.keep_from_line, now=self.now)
        path = prepared.summary_path(run.store, note.text)
        self.action = "prepared"
        self.changes += 1
        self.report["prepared"] = {"summary_file": str(path), "keep_from_line": note.keep_from_line,
                                   "summarizer": writer.describe(), "tokens_estimated": _estimate(note.text),
                                   "dry_run": run.dry_run}
        done = self.verb("prepared a summary", "would prepare a summary (dry run, nothing written)")
        self.say(f"  {done} with {writer.describe()} ({_estimate(note.text):,} tokens, about): {path}")
        self.say(f"  if you come back after {_clock(p.expires)}, `lookout compact` starts from it; "
                 "sooner, it is dropped")
        self._hook("on-prepare", self.settings.on_prepare, [str(path)], summary=str(path))

    def _compact(self) -> None:
        from lookout_cli.compaction import engine as compactor
        from lookout_cli.compaction import prepared

        run = self.run
        kept = prepared.find(run.store, self.transcript)
        ready = None
        if kept is not None:
            ready = compactor.PreparedSummary(kept.summary, kept.keep_from,
                                              f"the summary prepared while idle ({kept.created})")
        try:
            result = compactor.compact_transcript(self.transcript, self._options(), run.store, self._summarizer(),
                                                  prepared=ready)
        except LookoutError as exc:
            self.action = "failed"
            self.error = f"prepare-idle: the chat was not compacted: {exc.format_message()}"
            return
        self.compaction = result
        self.report["compact"] = result.report()
        if not result.changed:
            self.action = "none"
            self.say(f"  {compactor.summary_of(result)}")
            return
        self.action = "compacted"
        self.changes += 1
        head = compactor.summary_of(result)
        if run.dry_run:
            head = head.replace("compact:", "would compact (dry run):", 1)
        self.say(f"  {head}" + (f" (started from {ready.source})" if ready is not None else ""))
        if kept is not None:
            prepared.drop(self.transcript, run.dry_run)
        if result.summary:
            if run.dry_run:
                path = prepared.summary_path(run.store, result.summary)
            else:
                path = run.store.put(result.summary.encode("utf-8", "surrogatepass"), "text",
                                     purpose="idle-compaction-summary").path
            self.report["compact"]["summary_file"] = str(path)
            self._hook("on-prepare", self.settings.on_prepare, [str(path)], summary=str(path))

    # --- the plan, in words ---
    def _describe(self) -> None:
        p, chat = self.plan, self.chat
        basis = "provider count" if chat.basis == "provider" else "estimated"
        tier = {"5m": "5-minute", "1h": "1-hour"}[p.tier]
        self.say(f"prepare-idle: {p.tokens:,} tokens ({basis}), {chat.model.name}, {tier} cache ({chat.tier_source})")
        if p.state == "small":
            return
        when = f"refreshed by a keep-warm read at {_clock(p.refreshed)}" if p.reads_made else "last response"
        stamp = p.refreshed if p.reads_made else p.last_response
        out = f"runs out at {_clock(p.expires)} ({_until(p.expires, self.now)})"
        if p.reset is not None and p.expires == p.reset:
            out += ", at the provider's daily reset"
        elif p.reset is not None:
            out += f"; daily reset at {_clock(p.reset)}"
        self.say(f"  {when} {_clock(stamp)}; the cache {out}")
        if p.state in ("waiting", "prepare"):
            if p.pings:
                hook = "" if self.settings.on_ping else " (made through --on-ping)"
                self.say(f"  keep warm{hook}: {p.max_pings} reads cost less than one cold resend; {len(p.pings)} planned "
                         f"({_clock(p.pings[0])}" + (f" … {_clock(p.pings[-1])}" if len(p.pings) > 1 else "")
                         + f"), warm until {_clock(p.warm_until)}"
                         + (f", ${p.keep_warm_cost:.4f} in all" if p.keep_warm_cost is not None else ""))
            elif p.reads_left == 0:
                self.say(f"  keep warm: all {p.max_pings} reads worth making were made")
            else:
                why = "the daily reset comes first" if p.reset is not None and p.expires == p.reset else \
                    "a read would reach past the daily reset"
                self.say(f"  keep warm: no read planned ({why})")
        if p.cold_cost is not None:
            self.say(f"  coming back: warm ${p.warm_cost:.4f}, cold ${p.cold_cost:.4f} (sending "
                     f"{p.tokens:,} tokens again at the cache write price)")
        else:
            self.say(f"  coming back cold sends all {p.tokens:,} tokens again (no prices for {self.chat.model.name})")

    # --- hooks ---
    def _env(self, name: str, summary: str | None) -> dict:
        p, chat, t = self.plan, self.chat, self.transcript
        env = {
            "LOOKOUT_HOOK": name,
            "LOOKOUT_TRANSCRIPT": t.source or "",
            "LOOKOUT_SESSION": self.report.get("session") or "",
            "LOOKOUT_CHAT_MODEL": chat.model.name,
            "LOOKOUT_TIER": p.tier,
            "LOOKOUT_TOKENS": str(p.tokens),
            "LOOKOUT_STATE": p.state,
            "LOOKOUT_LAST_RESPONSE": _iso(p.last_response),
            "LOOKOUT_EXPIRES": _iso(p.expires),
            "LOOKOUT_NOW": _iso(self.now),
            "LOOKOUT_READS_LEFT": str(max(0, p.reads_left - (1 if name == "on-ping" else 0))),
            "LOOKOUT_PING_COST": "" if p.ping_cost is None else f"{p.ping_cost:.6f}",
            "LOOKOUT_COLD_COST": "" if p.cold_cost is None else f"{p.cold_cost:.6f}",
        }
        if summary:
            env["LOOKOUT_SUMMARY_FILE"] = summary
        return env

    def _hook(self, name: str, command: str | None, args: list[str], summary: str | None = None) -> bool:
        """Run a hook through sh with the plan JSON on standard input; False when it failed."""
        if not command:
            return True
        entry = {"hook": name, "command": command, "args": args, "ran": False}
        self.hooks.append(entry)
        if self.run.dry_run:
            entry["dry_run"] = True
            self.say(f"  would run --{name}: {command}")
            return True
        stdin = orjson.dumps({**self.report, "hook": name, **({"summary_file": summary} if summary else {})},
                             option=orjson.OPT_INDENT_2) + b"\n"
        env = {**os.environ, **self._env(name, summary)}
        try:
            shell = command + ' "$@"' if args else command  # as git runs "!" aliases: args follow CMD
            proc = subprocess.Popen(["/bin/sh", "-c", shell, f"lookout-{name}", *args], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        except OSError as exc:
            return self._hook_failed(entry, name, f"could not start it: {exc.strerror or exc}")
        try:
            out, err = proc.communicate(stdin, timeout=self.settings.hook_timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return self._hook_failed(entry, name, f"it took longer than {self.settings.hook_timeout:g} s")
        except BaseException:
            _kill(proc)
            raise
        entry.update(ran=True, exit=proc.returncode)
        for line in (out + err).decode("utf-8", "replace").splitlines():
            if line.strip():
                self.run.say(f"  [{name}] {line}")
        if proc.returncode != 0:
            last = next((x.strip() for x in reversed(err.decode("utf-8", "replace").splitlines()) if x.strip()), "")
            return self._hook_failed(entry, name, f"exited with status {proc.returncode}" + (f": {last}" if last else ""))
        self.say(f"  ran --{name}")
        return True

    def _hook_failed(self, entry: dict, name: str, why: str) -> bool:
        entry["error"] = why
        if self.error is None:
            self.error = f"--{name} hook failed: {why}"
        return False


def _kill(proc: subprocess.Popen) -> None:
    from lookout_cli.compaction.summarizers import _kill as kill

    kill(proc)


# --- output -------------------------------------------------------------------------------------

def _output(run: Run, transcript, idle: _Idle, json_out: bool) -> None:
    report = idle.report
    report.update({"action": idle.action, "changes": idle.changes, "dry_run": run.dry_run, "hooks": idle.hooks,
                   "messages": idle.lines, "error": idle.error})
    changes = idle.changes
    if json_out:
        if run.output or run.in_place:
            run.finish(transcript, report, changes=0)  # the transcript to its file; --check is judged below
        else:
            run.write_report(report)
        write_stdout(report_json(report))
    else:
        changed = 1 if idle.compaction is not None and idle.compaction.changed else 0
        run.finish(transcript, report, changes=changed)
    if idle.error:
        raise LookoutError(idle.error)
    if run.check and changes:
        raise CheckFailed(f"prepare-idle: {idle.action} would be done")


# --- small helpers --------------------------------------------------------------------------------

def _prepared_dict(kept) -> dict:
    return {"created": kept.created, "expires": kept.expires, "keep_from_line": kept.keep_from,
            "summary_file": str(kept.summary_path) if kept.summary_path else None, "index": str(kept.path)}


def _estimate(text: str) -> int:
    from lookout_cli.tokens.tokenizer import estimate

    return estimate(text)


def _ttl(tier: str) -> dt.timedelta:
    from lookout_cli.compaction.idle_plan import TTL

    return TTL[tier]


def _iso(when: dt.datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clock(when: dt.datetime | None) -> str:
    return _iso(when) or "?"


def _until(when: dt.datetime, now: dt.datetime) -> str:
    seconds = int((when - now).total_seconds())
    text = _span(abs(seconds))
    return f"in {text}" if seconds > 0 else ("now" if seconds == 0 else f"{text} ago")


def _span(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
