"""``lookout prepare-idle`` over a quiet chat's timeline: before the prepare window, inside it,
after expiry, a daily reset in between, the 1-hour tier, a small chat, a chat that moved on;
compact after expiry starts from the prepared summary and writes the same compaction; the
hooks run as real processes with the plan on standard input.

The fixtures are generated sessions (``test_compact_fixtures``) whose last response carries a
usage record with the provider counts and the time under the test's control."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import real_transcripts, run_lookout
from test_compact_fixtures import parse, session

from lookout_cli.cli import cli
from lookout_cli.compaction import prepared
from lookout_cli.core.saved import SavedStore
from lookout_cli.core.times import parse_time
from lookout_cli.tokens.models import lookup

T0 = parse_time("2025-10-01T11:00:00Z")  # the last response (the generated turns come before it)
FORMATS = ("claude-code", "anthropic")


def at(**delta) -> str:
    return (T0 + dt.timedelta(**delta)).isoformat().replace("+00:00", "Z")


def chat(fmt: str = "claude-code", tier: str | None = "5m", prompt: int = 150_000, output: int = 400,
         model: str = "claude-sonnet-4-5", stamp: dt.datetime = T0) -> bytes:
    """A six-turn session whose last response counted ``prompt`` tokens in, written to the
    cache with ``tier`` (None: read from the cache only), at ``stamp``."""
    data = session(fmt, turns=6, output_chars=1500)
    if tier is None:  # no earlier response wrote to the cache either
        data = data.replace(b'"cache_creation_input_tokens":200', b'"cache_creation_input_tokens":0')
    lines = data.splitlines(keepends=True)
    last = json.loads(lines[-1])
    write = 2_000 if tier else 0
    usage = {"input_tokens": 3, "cache_creation_input_tokens": write, "cache_read_input_tokens": prompt - 3 - write,
             "output_tokens": output,
             "cache_creation": {"ephemeral_5m_input_tokens": write if tier == "5m" else 0,
                                "ephemeral_1h_input_tokens": write if tier == "1h" else 0}}
    when = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if fmt == "claude-code":
        last["message"]["usage"] = usage
        last["message"]["model"] = model
        last["timestamp"] = when
    else:  # an Anthropic Messages API response line in place of the last assistant message
        last = {"id": "msg_last", "type": "message", "role": "assistant", "model": model, "content": last["content"],
                "stop_reason": "end_turn", "usage": usage, "timestamp": when}
    lines[-1] = json.dumps(last, separators=(",", ":")).encode() + b"\n"
    return b"".join(lines)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKOUT_SAVE_DIR", str(tmp_path / "saved"))
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def write(home: Path, data: bytes, name: str = "chat.jsonl") -> Path:
    path = home / name
    path.write_bytes(data)
    return path


def idle(*args: str, data: bytes | None = None):
    """Run ``lookout prepare-idle`` in process: (exit code, stdout bytes, stderr, report)."""
    report = Path(os.environ["LOOKOUT_DATA_DIR"]).parent / "report.json"
    report.unlink(missing_ok=True)
    result = CliRunner().invoke(cli, ["prepare-idle", "--report", str(report), *args], input=data)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    found = json.loads(report.read_text()) if report.exists() else None
    return result.exit_code, result.stdout_bytes, result.stderr, found


def compact(*args: str):
    result = CliRunner().invoke(cli, ["compact", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout_bytes, result.stderr


def kept(path: Path):
    transcript = parse(path.read_bytes())
    transcript.source = str(path)
    return prepared.find(SavedStore(Path(os.environ["LOOKOUT_SAVE_DIR"])), transcript)


def visible(data: bytes) -> list[tuple]:
    return [(i.role, i.kind, i.text, i.call_id, i.tool, i.is_error) for i in parse(data).view().items]


def hook_script(home: Path, name: str, body: str = "") -> tuple[Path, Path]:
    """A shell script that writes its arguments, LOOKOUT_* variables and standard input to a file."""
    out = home / f"{name}.out"
    script = home / f"{name}.sh"
    script.write_text("#!/bin/sh\n"
                      f"{{ echo \"args: $*\"; env | grep '^LOOKOUT_' | sort; echo '--- stdin'; cat; }} > '{out}'\n"
                      + body)
    script.chmod(0o755)
    return script, out


def hook_input(out: Path) -> tuple[str, dict, dict]:
    text = out.read_text()
    head, _, stdin = text.partition("--- stdin\n")
    lines = head.splitlines()
    env = dict(line.split("=", 1) for line in lines[1:])
    return lines[0].removeprefix("args: "), env, json.loads(stdin)


# --- the timeline -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_before_the_window_nothing_is_done_and_it_says_when(fmt, home):
    data = chat(fmt)
    src = write(home, data)
    code, out, err, report = idle("--now", at(minutes=1), str(src))
    assert code == 0, err
    assert out == data
    plan = report["plan"]
    assert plan["state"] == "waiting" and report["action"] == "none"
    assert plan["expires"] == at(minutes=5) and plan["prepare_at"] == at(minutes=4)
    assert report["chat"]["tokens"] == 150_400 and report["chat"]["basis"] == "provider"
    assert "the summary is written from " + at(minutes=4) in err
    assert kept(src) is None and not (home / "data" / "prepared").exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_inside_the_window_a_summary_is_prepared_and_the_transcript_passes_through(fmt, home):
    data = chat(fmt)
    src = write(home, data)
    code, out, err, report = idle("--now", at(minutes=4, seconds=10), str(src))
    assert code == 0, err
    assert out == data  # byte for byte
    assert report["plan"]["state"] == "prepare" and report["action"] == "prepared"
    note = kept(src)
    assert note is not None and "Goal" in note.summary
    assert Path(report["prepared"]["summary_file"]).read_text() == note.summary
    assert note.expires == at(minutes=5) and note.keep_from
    # a second run in the window finds it and changes nothing
    code, out, err, again = idle("--now", at(minutes=4, seconds=40), str(src))
    assert code == 0 and out == data
    assert again["action"] == "ready" and "already prepared" in err
    assert kept(src).summary == note.summary


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("summarizer", ("embedded", "command"))
def test_after_expiry_compact_starts_from_the_prepared_summary_and_writes_the_same_compaction(
        fmt, summarizer, home, monkeypatch):
    data = chat(fmt)
    src = write(home, data)
    spec = []
    if summarizer == "command":
        script = home / "summarize.sh"
        script.write_text("#!/bin/sh\ncat > /dev/null\nprintf '## Goal\\nPort the CSV importer to the new storage "
                          "API.\\n## Next steps\\n- module_6.py\\n'\n")
        script.chmod(0o755)
        spec = ["--summarizer", f"command:{script}"]
    code, _, err, report = idle(*spec, "--now", at(minutes=4, seconds=10), str(src))
    assert code == 0 and report["action"] == "prepared", err
    code, out, err, report = idle("--now", at(minutes=6), str(src))
    assert code == 0 and out == data
    assert report["plan"]["state"] == "expired" and report["action"] == "ready"
    assert "`lookout compact` starts from the summary prepared at" in err

    code, from_prepared, err = compact("--force", str(src))
    assert code == 0, err
    assert "started from the summary prepared while idle" in err

    # the same compaction, written directly with the same summarizer and no prepared summary
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(home / "elsewhere"))
    code, direct, err = compact("--force", *spec, str(src))
    assert code == 0 and "prepared while idle" not in err, err
    assert visible(from_prepared) == visible(direct)
    summaries = [i.text for i in parse(direct).view().items if i.kind == "summary"]
    assert summaries and len(parse(direct).view().items) < len(parse(data).view().items)


def test_expired_without_a_summary_says_what_coming_back_costs(home):
    data = chat()
    src = write(home, data)
    code, out, err, report = idle("--now", at(hours=2), str(src))
    assert code == 0 and out == data
    assert report["action"] == "none" and kept(src) is None
    model = lookup("claude-sonnet-4-5")
    cold = 150_400 / 1e6 * model.price_cache_write_5m
    assert report["plan"]["cost"]["cold_resume"] == pytest.approx(cold)
    assert f"${cold:.4f}" in err and "no summary prepared" in err


def test_a_daily_reset_in_between_moves_expiry_and_stops_keep_warm_reads(home):
    data = chat(tier="1h")
    src = write(home, data)
    reset = (T0 + dt.timedelta(minutes=20)).strftime("%H:%M")
    code, out, err, report = idle("--daily-reset", reset, "--now", at(minutes=10), str(src))
    assert code == 0 and out == data
    plan = report["plan"]
    assert plan["expires"] == at(minutes=20) == plan["daily_reset"]  # not T0 + 1 hour
    assert plan["keep_warm"]["reads"] == [] and plan["state"] == "waiting"
    assert "at the provider's daily reset" in err and "the daily reset comes first" in err
    code, out, err, report = idle("--daily-reset", reset, "--now", at(minutes=19, seconds=10), str(src))
    assert code == 0 and out == data and report["action"] == "prepared"

    # a reset after the TTL changes nothing; keep-warm reads stop before it
    code, _, _, report = idle("--daily-reset", (T0 + dt.timedelta(hours=3)).strftime("%H:%M"),
                              "--now", at(minutes=10), str(src))
    plan = report["plan"]
    assert plan["expires"] == at(hours=1)
    reads = [parse_time(t) for t in plan["keep_warm"]["reads"]]
    assert reads and all(t + dt.timedelta(hours=1) <= parse_time(plan["daily_reset"]) for t in reads)
    assert len(reads) == 2  # 11:59:30 and 12:59:00 stay warm until 13:59:00; a third would pass 14:00


def test_daily_resets_by_provider_from_the_config(home, monkeypatch):
    config = home / "config.toml"
    config.write_text('[idle.daily_resets]\nanthropic = ["11:03"]\nopenai = ["11:01"]\n')
    monkeypatch.setenv("LOOKOUT_CONFIG", str(config))
    src = write(home, chat())
    code, _, err, report = idle("--now", at(minutes=1), str(src))
    assert code == 0, err
    assert report["plan"]["expires"] == at(minutes=3)  # the anthropic reset, not the openai one
    config.write_text('[idle]\ndaily_resets = ["25:00"]\n')
    code, _, err, _ = idle("--now", at(minutes=1), str(src))
    assert code == 2 and "idle.daily_resets" in err and "25:00" in err


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_one_hour_tier(fmt, home):
    data = chat(fmt, tier="1h")
    src = write(home, data)
    code, out, err, report = idle("--now", at(minutes=50), str(src))
    assert code == 0 and out == data
    plan = report["plan"]
    assert report["chat"]["tier"] == "1h" and report["chat"]["tier_source"] == "recorded"
    assert plan["expires"] == at(hours=1) and plan["state"] == "waiting"
    assert plan["keep_warm"]["max_reads"] == 19
    model = lookup("claude-sonnet-4-5")
    assert plan["cost"]["cold_resume"] == pytest.approx(150_400 / 1e6 * model.price_cache_write_1h)
    code, out, err, report = idle("--now", at(minutes=59, seconds=10), str(src))
    assert code == 0 and out == data and report["action"] == "prepared"


def test_the_tier_falls_back_to_the_config_when_the_usage_does_not_say(home, monkeypatch):
    src = write(home, chat(tier=None))  # cache reads only: the records do not say which tier
    code, _, _, report = idle("--now", at(minutes=10), str(src))
    assert report["chat"]["tier"] == "5m" and report["plan"]["state"] == "expired"
    monkeypatch.setenv("LOOKOUT_IDLE_CACHE_TTL", "1h")
    code, _, _, report = idle("--now", at(minutes=10), str(src))
    assert report["chat"]["tier_source"] == "config" and report["plan"]["state"] == "waiting"
    # a recorded tier wins over the configured one
    src = write(home, chat(tier="5m"), "five.jsonl")
    code, _, _, report = idle("--now", at(minutes=10), str(src))
    assert report["chat"]["tier"] == "5m" and report["chat"]["tier_source"] == "recorded"


def test_a_chat_under_100000_tokens_is_left_alone(home):
    data = chat(prompt=99_000, output=500)
    src = write(home, data)
    code, out, err, report = idle("--now", at(minutes=4, seconds=10), str(src))
    assert code == 0 and out == data
    assert report["chat"]["tokens"] == 99_500 and report["plan"]["state"] == "small"
    assert report["action"] == "none" and kept(src) is None and "under 100,000 tokens" in err
    code, _, _, report = idle("--min-tokens", "90000", "--now", at(minutes=4, seconds=10), str(src))
    assert report["action"] == "prepared"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_chat_that_moved_on_drops_its_prepared_summary(fmt, home):
    data = chat(fmt)
    src = write(home, data)
    code, _, err, report = idle("--now", at(minutes=4, seconds=10), str(src))
    assert report["action"] == "prepared"
    index = next((home / "data" / "prepared").glob("*.json"))
    # the user comes back before expiry: a new message
    last = json.loads(data.splitlines()[-1])
    if fmt == "claude-code":
        line = {**{k: last[k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version")},
                "parentUuid": last["uuid"], "type": "user", "uuid": "u-back",
                "message": {"role": "user", "content": "One more thing: rename the module."},
                "timestamp": at(minutes=4, seconds=30)}
    else:
        line = {"role": "user", "content": "One more thing: rename the module."}
    newer = data + json.dumps(line).encode() + b"\n"
    src.write_bytes(newer)
    assert kept(src) is None  # compact would not use it
    code, out, err, report = idle("--now", at(minutes=5), str(src))
    assert code == 0 and out == newer
    assert report["dropped"] is True and "moved on" in err and "dropped it" in err
    assert not index.exists()
    code, compacted, err = compact("--force", str(src))
    assert code == 0 and "prepared while idle" not in err


# --- modes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_compact_mode_compacts_in_the_window_and_not_before(fmt, home):
    data = chat(fmt)
    src = write(home, data)
    code, out, err, report = idle("--mode", "compact", "--now", at(minutes=2), str(src))
    assert code == 0 and out == data and report["action"] == "none"
    code, out, err, report = idle("--mode", "compact", "--now", at(minutes=4, seconds=10), str(src))
    assert code == 0, err
    assert report["action"] == "compacted" and out != data
    view = parse(out).view()
    assert any(i.kind == "summary" for i in view.items) and view.orphans() == []
    code, direct, _ = compact("--force", str(src))
    assert visible(out) == visible(direct)  # what compact --force writes
    # run again on the result: the chat is small now, nothing changes
    again = write(home, out, "out.jsonl")
    code, out2, err, report = idle("--mode", "compact", "--now", at(minutes=4, seconds=20), str(again))
    assert code == 0 and out2 == out and report["chat"]["basis"] == "estimated" and report["action"] == "none"


def test_off_mode_passes_through(home, monkeypatch):
    data = chat()
    src = write(home, data)
    monkeypatch.setenv("LOOKOUT_IDLE_MODE", "off")
    code, out, err, report = idle("--now", at(minutes=4, seconds=10), str(src))
    assert code == 0 and out == data and report["mode"] == "off" and report["action"] == "none"
    assert kept(src) is None


def test_dry_run_and_check_write_nothing_and_run_no_hook(home):
    data = chat()
    src = write(home, data)
    script, hook_out = hook_script(home, "prepare")
    code, out, err, report = idle("--dry-run", "--on-prepare", str(script), "--now", at(minutes=4, seconds=10), str(src))
    assert code == 0 and out == data
    assert "would prepare a summary" in err and f"would run --on-prepare: {script}" in err
    assert report["hooks"][0]["ran"] is False and not hook_out.exists()
    assert kept(src) is None and not (home / "saved").exists()
    code, out, err, _ = idle("--check", "--now", at(minutes=4, seconds=10), str(src))
    assert code == 1 and out == data and kept(src) is None
    code, out, err, _ = idle("--check", "--now", at(minutes=1), str(src))
    assert code == 0


def test_json_prints_the_report_instead_of_the_transcript(home):
    src = write(home, chat())
    result = CliRunner().invoke(cli, ["prepare-idle", "--json", "--now", at(minutes=1), str(src)])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["plan"]["expires"] == at(minutes=5) and report["plan"]["keep_warm"]["max_reads"] == 12


# --- hooks -----------------------------------------------------------------------------------------

def test_on_prepare_runs_with_the_summary_file(home):
    data = chat()
    src = write(home, data)
    script, out_file = hook_script(home, "prepare")
    code, out, err, report = idle("--on-prepare", str(script), "--now", at(minutes=4, seconds=10), str(src))
    assert code == 0 and out == data, err
    args, env, stdin = hook_input(out_file)
    note = kept(src)
    assert Path(args).read_text() == note.summary
    assert env["LOOKOUT_SUMMARY_FILE"] == args and env["LOOKOUT_HOOK"] == "on-prepare"
    assert env["LOOKOUT_TRANSCRIPT"] == str(src) and env["LOOKOUT_EXPIRES"] == at(minutes=5)
    assert stdin["plan"]["state"] == "prepare" and stdin["summary_file"] == args
    assert report["hooks"][0]["ran"] and report["hooks"][0]["exit"] == 0


def test_on_ping_runs_when_a_read_is_due_and_the_read_keeps_the_cache_warm(home):
    data = chat()
    src = write(home, data)
    script, out_file = hook_script(home, "ping")
    # in the prepare window but before the ping margin: the read will keep it warm, no summary yet
    code, out, err, report = idle("--on-ping", str(script), "--now", at(minutes=4, seconds=10), str(src))
    assert code == 0 and out == data and report["action"] == "none"
    assert not out_file.exists() and kept(src) is None and "next keep-warm read at " + at(minutes=4, seconds=30) in err
    # within the margin: the hook runs once, with the plan
    code, out, err, report = idle("--on-ping", str(script), "--now", at(minutes=4, seconds=35), str(src))
    assert code == 0 and out == data and report["action"] == "ping", err
    args, env, stdin = hook_input(out_file)
    assert env["LOOKOUT_EXPIRES"] == at(minutes=5) and env["LOOKOUT_TRANSCRIPT"] == str(src)
    assert env["LOOKOUT_TIER"] == "5m" and env["LOOKOUT_TOKENS"] == "150400" and env["LOOKOUT_READS_LEFT"] == "11"
    assert stdin["plan"]["keep_warm"]["due_now"] is True and stdin["hook"] == "on-ping"
    # the next run knows the read refreshed the cache
    out_file.unlink()
    code, out, err, report = idle("--on-ping", str(script), "--now", at(minutes=4, seconds=50), str(src))
    plan = report["plan"]
    assert plan["refreshed"] == at(minutes=4, seconds=35) and plan["expires"] == at(minutes=9, seconds=35)
    assert plan["keep_warm"]["reads_made"] == 1 and plan["state"] == "waiting" and not out_file.exists()


def test_when_no_read_is_left_the_summary_takes_over(home):
    data = chat()
    src = write(home, data)
    script, out_file = hook_script(home, "ping")
    reset = ["--daily-reset", (T0 + dt.timedelta(minutes=12)).strftime("%H:%M")]  # room for one read
    code, _, err, report = idle("--on-ping", str(script), *reset, "--now", at(minutes=4, seconds=35), str(src))
    assert report["action"] == "ping" and len(report["plan"]["keep_warm"]["reads"]) == 1, err
    code, _, err, report = idle("--on-ping", str(script), *reset, "--now", at(minutes=8, seconds=40), str(src))
    assert code == 0, err
    plan = report["plan"]
    assert plan["keep_warm"]["reads"] == [] and plan["state"] == "prepare"  # 9:35 expiry; 14:35 would pass 12:00
    assert report["action"] == "prepared" and kept(src) is not None


def test_a_failing_hook_exits_2_with_its_last_line_and_the_transcript_still_flows(home):
    data = chat()
    src = write(home, data)
    script, _ = hook_script(home, "ping", "echo 'warming up' >&2\necho 'keep-warm: 429 rate limited' >&2\nexit 3\n")
    result = run_lookout("prepare-idle", "--on-ping", str(script), "--now", at(minutes=4, seconds=40), str(src))
    assert result.returncode == 2
    assert result.stdout == data
    last = result.stderr.decode().strip().splitlines()[-1]
    assert "--on-ping hook failed" in last and "status 3" in last and "keep-warm: 429 rate limited" in last
    # in the prepare window a failed read leaves the summary to be written instead
    assert kept(src) is not None


def test_bad_input_is_a_clear_error(home):
    src = write(home, chat())
    result = run_lookout("prepare-idle", "--now", "yesterday", str(src))
    assert result.returncode == 2 and b"--now" in result.stderr and result.stdout == b""
    result = run_lookout("prepare-idle", "--mode", "compact", "--json", str(src))
    assert result.returncode == 2 and b"needs -o FILE or -i" in result.stderr
    result = run_lookout("prepare-idle", input=b"")
    assert result.returncode == 0 and result.stdout == b""


# --- real transcripts ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name)
def test_real_transcripts_pass_through_byte_for_byte_in_the_window(path, home):
    """Every shared transcript is under 100,000 tokens, so --min-tokens 0 puts each on the timeline."""
    data = path.read_bytes()
    code, out, err, report = idle("--min-tokens", "0", str(path))
    assert code == 0 and out == data, err
    if report.get("plan") is None:  # no response time recorded
        assert report["action"] == "unknown" and "no response time" in err
        return
    window = report["plan"]["prepare_at"]
    code, out, err, report = idle("--min-tokens", "0", "--now", window, str(path))
    assert code == 0 and out == data, err
    assert report["plan"]["state"] == "prepare"
    assert report["action"] in ("prepared", "none")
    if report["action"] == "prepared":
        assert Path(report["prepared"]["summary_file"]).is_file()
    else:
        assert "nothing to summarize" in err
