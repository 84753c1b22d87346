"""``lookout statusline``: one line from Claude Code's status-line JSON (its shape as Claude Code
2.1.328 sends it) or a transcript, whose percent is measure's within a point, read from the end
of the file without click or the tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import SHARED_TRANSCRIPTS, lookout_exe, real_transcripts, run_lookout
from test_integrations import nearly_full_transcript

# What Claude Code 2.1.328 passed to a statusLine command after a response (captured with a
# command that saved its standard input; paths are this test's)
STATUS_JSON = {
    "session_id": "fe010971-36fa-45bb-9b34-e3e91817e1bd", "transcript_path": None, "cwd": None,
    "prompt_id": "aff85279-1979-4a74-9c14-e61824c1f299", "effort": {"level": "medium"},
    "model": {"id": "claude-opus-5-5", "display_name": "Opus 5.5"},
    "workspace": {"current_dir": None, "project_dir": None, "added_dirs": []}, "version": "2.1.328",
    "output_style": {"name": "default"},
    "cost": {"total_cost_usd": 0.0005, "total_duration_ms": 7610, "total_api_duration_ms": 110,
             "total_lines_added": 0, "total_lines_removed": 0},
    "context_window": {"total_input_tokens": 100, "total_output_tokens": 5, "context_window_size": 1000000,
                       "current_usage": {"input_tokens": 100, "output_tokens": 5, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 0},
                       "used_percentage": 0, "remaining_percentage": 100},
    "exceeds_200k_tokens": False,
    "prompt_cache": {"warm": False, "ttl": "5m", "expires_at": None, "requests": 1},
    "fast_mode": False, "thinking": {"enabled": True},
}


def status(payload: dict | None, *args: str, cwd=None) -> str:
    result = run_lookout("statusline", *args, input=json.dumps(payload).encode() if payload else b"", cwd=cwd)
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def payload_for(path, tmp_path, **extra) -> dict:
    return {**STATUS_JSON, "transcript_path": str(path), "cwd": str(tmp_path),
            "workspace": {"current_dir": str(tmp_path), "project_dir": str(tmp_path), "added_dirs": []}, **extra}


def measured_percent(path) -> float | None:
    result = run_lookout("measure", "--json", str(path))
    assert result.returncode == 0, result.stderr
    used = json.loads(result.stdout)["used"]
    return used["percent"] if used.get("basis") != "unknown" else None


# a Claude Code session and a Codex rollout (a full measure of each takes seconds; the rest of
# the shared transcripts agree as well, or show "compacted" / stay under 10%)
MATCHED = ("ccviewer-fe5e1c67", "rollout-2025-11-17T15-30-28")


@pytest.mark.parametrize("path", [p for p in real_transcripts() if p.name.startswith(MATCHED)],
                         ids=lambda p: p.name[:40])
def test_the_percent_is_measures_within_a_point(path, tmp_path):
    line = status(payload_for(path, tmp_path), "--color", "never")
    percent = measured_percent(path)
    shown = line.split(" · ")[0]
    if shown.endswith("%") or "%" in shown.split()[0]:
        assert abs(float(shown.split("%")[0]) - percent) <= 1, (line, percent)
    elif line.startswith("compacted"):
        pass  # no usage since the last compaction: measure estimates it by counting, the line says so
    else:  # hidden under 10%: the tokens only
        assert percent < 10, (line, percent)


def test_states_colours_and_figures(tmp_path):
    session = tmp_path / "s.jsonl"
    cases = [(10_000, None, "10k/200k"), (60_000, "", "30% 60k/200k"), (156_000, "\x1b[33m", "78%"),
             (167_500, "\x1b[31m", "84%")]
    for tokens, colour, text in cases:
        session.write_bytes(nearly_full_transcript(tokens))
        line = status(payload_for(session, tmp_path), "--color", "always")
        assert text in line.replace("\x1b[0m", "").replace(colour or "\x1b[2m", ""), line
        if colour:
            assert line.startswith(colour)
        elif colour is None:
            assert line.startswith("\x1b[2m") and "%" not in line  # hidden under 10%
        assert line.endswith("$0.00") or "$0.00" in line  # the cost Claude Code reports
    session.write_bytes(nearly_full_transcript(180_000))  # past where compaction is due (168k)
    assert "compaction due" in status(payload_for(session, tmp_path), "--color", "never")
    plain = status(payload_for(session, tmp_path), "--color", "never")
    assert "\x1b" not in plain and "cache" in plain  # the last response's time: the cache is cold by now
    session.write_bytes(nearly_full_transcript(60_000))
    assert "summary at 167k" in status(payload_for(session, tmp_path), "--color", "never")


def test_a_new_session_and_odd_input_still_give_one_line(tmp_path):
    assert status(payload_for(tmp_path / "not-yet.jsonl", tmp_path)).startswith("no usage yet")
    assert status(None, str(tmp_path / "nothing.jsonl"), "--color", "never").startswith("no usage yet")
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    assert status(payload_for(folder, tmp_path)).startswith("lookout: ")
    garbage = run_lookout("statusline", input=b"\xff not json")
    assert garbage.returncode == 0 and len(garbage.stdout.splitlines()) == 1
    helped = run_lookout("statusline", "--help")
    assert helped.returncode == 0 and b"Claude Code" in helped.stdout


def test_it_reads_the_end_and_loads_neither_click_nor_the_tokenizer(tmp_path):
    session = tmp_path / "long.jsonl"
    with open(session, "wb") as handle:
        junk = b'{"type":"progress","data":"' + b"x" * 4000 + b'"}\n'
        handle.write(junk * 20_000)  # 80 MB that are never parsed: only the end is read
        handle.write(nearly_full_transcript(150_000))
    code = ("import runpy, sys; sys.argv = ['lookout', 'statusline', '--color', 'never', sys.argv[1]]\n"
            "try:\n    runpy.run_module('lookout_cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'tiktoken', 'orjson', 'PIL')))")
    status(None, str(session))  # the model's figures are worked out once (with config, click...) and kept
    result = subprocess.run([sys.executable, "-c", code, str(session)], capture_output=True, timeout=60, check=True)
    out = result.stdout.decode().splitlines()
    assert out[0].startswith("75% 150k/200k"), out
    assert out[1] == "[]"
    assert lookout_exe()  # the installed script runs the same __main__


def test_codex_rollouts_read_their_recorded_window(tmp_path):
    rollout = SHARED_TRANSCRIPTS / "codex" / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    if not rollout.exists():
        pytest.skip("the shared Codex rollout is not here")
    line = status(None, str(rollout), "--color", "never")
    assert "/258k" in line  # model_context_window of its token_count events, as measure reads it


def test_a_model_the_models_file_does_not_know_takes_the_window_claude_code_states(tmp_path):
    session = tmp_path / "s.jsonl"
    session.write_bytes(nearly_full_transcript(150_000).replace(b"claude-sonnet-4-5-20250929", b"claude-opus-5-5"))
    stated = status(payload_for(session, tmp_path), "--color", "never")  # Claude Code says 1,000,000
    assert stated.startswith("15% 150k/1M · summary at 850k"), stated
    known = tmp_path / "known.jsonl"
    known.write_bytes(nearly_full_transcript(150_000))  # a model the file knows keeps measure's window
    assert status(payload_for(known, tmp_path), "--color", "never").startswith("75% 150k/200k")
