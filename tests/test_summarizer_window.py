"""A model summarizer's prompt fits the summary model's window: a 2M-token session summarized
by a 128k-window model through a real server on 127.0.0.1 goes in parts, no request the server
receives is over the window (counted with the model's own tokenizer), each part updates the
summary of the parts before it, and the final note holds what every part held. The window
comes from the models file or compaction.summary_context_window; the length asked for is the
output limit sent, within the model's own."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import time

from conftest import lookout_exe
from test_compact_fixtures import FIRST_PROMPT, claude_code, parse, script
from test_compact_summarizers import env_for
from test_summarizer_http import Server, answer, send, server  # noqa: F401 - server is a fixture

from lookout_cli.compaction import note as summary_note
from lookout_cli.compaction import summarizers
from lookout_cli.tokens.tokenizer import count

CHECKPOINT = re.compile(r"ck-\d{4}")


def checkpoint_server(server: Server, kind: str = "openai") -> list[dict]:
    """Answers each summary request with a note naming every checkpoint its prompt holds (the
    summary so far and the part of the conversation); a request for what a note left out gets
    the draft back. Returns the list each request's body, tokens and checkpoints go to."""
    seen: list[dict] = []

    def respond(handler, n):
        body = server.requests[n][1]
        system = body["messages"][0]["content"] if kind == "openai" else body["system"]
        user = body["messages"][-1]["content"]
        seen.append({"tokens": count(system) + count(user), "max_tokens": body["max_tokens"], "user": user,
                     "asked": re.search(r"in at most about ([\d,]+) tokens", user)})
        if "<draft-summary>" in user:
            note = user.split("<draft-summary>\n", 1)[1].rsplit("\n</draft-summary>", 1)[0]
        else:
            marks = sorted(set(CHECKPOINT.findall(user)))
            note = "## Goal\nPort the CSV importer.\n\n## Progress\n### Done\n- checkpoints: " + " ".join(marks) + "\n"
        send(handler, 200, answer(kind, note))

    server.respond = respond
    return seen


def test_a_2m_token_session_fits_a_128k_summary_model(server, tmp_path):
    turns = script(turns=520, steps=3, output_chars=9_000, seed=3)
    for t, turn in enumerate(turns):
        turn.final += f" Checkpoint ck-{t:04d} reached."
    path = tmp_path / "long.jsonl"
    path.write_bytes(claude_code(turns))
    seen = checkpoint_server(server)
    report = tmp_path / "report.json"
    start = time.monotonic()
    r = subprocess.run([*lookout_exe(), "compact", "--force", "--estimate", "--max-tokens", "3M", "--summarizer", "openai",
                        "--summary-url", server.url, "--summary-model", "gpt-4o-mini", "--report", str(report),
                        str(path)], capture_output=True, env=env_for(tmp_path), timeout=300, check=False)
    took = time.monotonic() - start
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert data["tokens"]["before"] >= 2_000_000
    summaries = [s for s in seen if s["asked"]]
    assert len(summaries) >= 3, len(summaries)  # the conversation did not fit one request
    window = 128_000  # gpt-4o-mini's, from the models file
    for s in seen:
        assert s["tokens"] + s["max_tokens"] <= window, (s["tokens"], s["max_tokens"])
    for s in summaries:
        assert int(s["asked"][1].replace(",", "")) == s["max_tokens"] == 16_384  # the model's output limit
    for before, after in itertools.pairwise(summaries):  # each part updates the summary so far
        assert "<previous-summary>" in after["user"] and CHECKPOINT.search(before["user"])
    [note] = [i.text for i in parse(r.stdout).view().items if i.kind == "summary"]
    summarized = {m for s in summaries for m in CHECKPOINT.findall(s["user"].split("<conversation>", 1)[1])}
    assert len(summarized) > 400 and summarized <= set(CHECKPOINT.findall(note))  # every part's, merged
    assert f"{len(summaries)} parts merged" in r.stderr.decode()
    print(f"\n{data['tokens']['before']:,} tokens, {len(summaries)} parts, largest request "
          f"{max(s['tokens'] for s in seen):,} + {summaries[0]['max_tokens']:,} tokens, {took:.1f} s")


def request_for(window_items: int = 40):
    items = parse(claude_code(script(turns=window_items, output_chars=3_000))).view().items
    digest = summary_note.digest(items)
    return summarizers.Request(items=items, digest=digest, budget=20_000, replaced_tokens=10**9, count=count)


def test_the_window_setting_overrides_the_models_file(server, tmp_path):
    seen = checkpoint_server(server, "anthropic")
    writer = summarizers.make("anthropic", "claude-haiku-4-5", server.url, timeout=60, window="24k")
    writer.summarize(request_for())
    lim = summarizers.limits("claude-haiku-4-5", 24_000, 20_000)
    assert lim.out == 6_000  # a quarter of a small window at most: the rest is for the prompt
    assert len([s for s in seen if s["asked"]]) >= 2
    assert all(s["tokens"] + s["max_tokens"] <= 24_000 for s in seen)
    r = subprocess.run([*lookout_exe(), "compact", "--force", "--dry-run", "-"], input=b"", capture_output=True,
                       env=env_for(tmp_path, LOOKOUT_COMPACTION_SUMMARY_CONTEXT_WINDOW="300"), check=False)
    assert r.returncode == 2 and b"compaction.summary_context_window" in r.stderr and b"4,000" in r.stderr


def test_the_command_summarizer_gets_parts_too(tmp_path):
    """``command:`` with compaction.summary_context_window: each prompt on standard input fits."""
    log = tmp_path / "prompts.jsonl"
    program = tmp_path / "model.py"
    program.write_text(
        "import json, re, sys\nprompt = sys.stdin.read()\n"
        f"open({str(log)!r}, 'a').write(json.dumps(prompt) + '\\n')\n"
        "print('## Goal\\nPort it.\\n- ' + ' '.join(sorted(set(re.findall(r'ck-\\d{4}', prompt)))))\n")
    writer = summarizers.make(f"command:{subprocess.list2cmdline(['python3', str(program)])}", timeout=60,
                              window=30_000)
    request = request_for()
    for n, item in enumerate(i for i in request.items if i.role == "assistant" and i.kind == "text"):
        item.text += f" Checkpoint ck-{n:04d}."
    note = writer.summarize(request)
    prompts = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(prompts) >= 2 and all(count(p) <= 30_000 - 7_500 for p in prompts)
    assert FIRST_PROMPT in prompts[0]
    assert set(CHECKPOINT.findall(note)) >= set(CHECKPOINT.findall("".join(p.split("<conversation>")[1]
                                                                            for p in prompts if "<conversation>" in p)))
