"""Past 4 M characters, what a summary replaces is priced by a sample instead of tokenized
(``tokens.sample``): the estimate holds on real and generated text, and ``compact`` gives the note,
the kept turns and the figures after that tokenizing everything gives, on generated sessions of
Claude Code and a message list, tried with the installed ``lookout``."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from conftest import REPO, real_transcripts, run_lookout

from lookout_cli.core import jsonl
from lookout_cli.formats import Transcript, detect
from lookout_cli.formats.kinds import IMAGE, SETUP
from lookout_cli.tokens import sample as head_sample
from lookout_cli.tokens import tokenizer as tokens

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import Corpus, generate  # noqa: E402


def _texts(path) -> tuple[list[str], str]:
    with open(path, "rb") as fh:
        records = list(jsonl.read_records(fh))
    view = Transcript(records, detect(records)).view()
    texts = [i.text for i in view.items if i.kind not in (IMAGE, SETUP) and i.text]
    return texts, tokens.encoding_for_model(view.model)


def _error(texts: list[str], encoding: str, points: int, window: int) -> float:
    count = lambda text: tokens.count(text, encoding)  # noqa: E731
    rate = head_sample.per_char(texts, count, points, window)
    priced = sum(head_sample.priced(t, rate) for t in texts)
    exact = sum(count(t) for t in texts)
    return priced / exact - 1


def test_a_sample_prices_real_text_closely():
    tried = 0
    for path in real_transcripts():
        texts, encoding = _texts(path)
        if sum(map(len, texts)) < 20_000:
            continue
        # 32 windows of 256 characters (8 k of 23-127 k): within 8%; the product's is 2 M characters
        assert abs(_error(texts, encoding, 32, 256)) < 0.08, path.name
        tried += 1
    assert tried >= 2 or not real_transcripts()


def test_a_sample_follows_the_length_of_each_kind_of_text():
    code = (REPO / "lookout_cli" / "compaction" / "engine.py").read_text()
    letters = "lorem ipsum " * 20_000  # a few tokens for many characters
    texts = [code] * 6 + [letters] * 3 + [code[:500]] * 400
    error = _error(texts, "o200k_base", 64, 1024)
    assert abs(error) < 0.03
    # all the text within the sample's size is counted, not sampled: off by each text's rounding
    small = [code[:20_000], letters[:20_000]]
    count = lambda text: tokens.count(text, "o200k_base")  # noqa: E731
    rate = head_sample.per_char(small, count, 64, 1024)
    assert abs(sum(head_sample.priced(t, rate) for t in small) - sum(map(count, small))) <= 1


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Generated sessions whose summarized turns hold over 4 M characters."""
    folder = tmp_path_factory.mktemp("big")
    corpus = Corpus()
    return {fmt: (folder / f"{fmt}.jsonl", generate(folder / f"{fmt}.jsonl", fmt, 12, corpus=corpus))[0]
            for fmt in ("claude-code", "openai")}


def _compact(path, tmp, *extra):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache"), "XDG_DATA_HOME": str(tmp / "data"),
           "XDG_STATE_HOME": str(tmp / "state")}
    report = tmp / f"report{len(list(tmp.glob('report*')))}.json"
    r = run_lookout("compact", "--isolated", "--max-tokens", "100000", "--report", str(report), *extra, str(path),
                    env=env, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout, json.loads(report.read_text()), r.stderr.decode(), env


@pytest.mark.parametrize("fmt", ["claude-code", "openai"])
def test_compact_prices_the_summarized_turns_and_gives_the_same_result(fmt, big, tmp_path):
    path = big[fmt]
    out, report, err, env = _compact(path, tmp_path)
    _, full, full_err, _ = _compact(path, tmp_path, "--tokenize-all")  # the same saved store

    assert report["changed"] and full["changed"]
    assert report["tokenized"]["sampled_items"] > 500 and full["tokenized"]["sampled_items"] == 0
    assert report["tokenized"]["distinct_texts"] * 5 < full["tokenized"]["distinct_texts"]
    # the figures before: within 1% of tokenizing everything, and said to be estimated
    before, exact_before = report["tokens"]["before"], full["tokens"]["before"]
    assert abs(before / exact_before - 1) < 0.01
    assert report["tokens"]["before_sampled"] and not full["tokens"]["before_sampled"]
    assert f"compact: about {before:,} →" in err and f"compact: {exact_before:,} →" in full_err
    summarized = [s for s in report["stages"] if s["stage"] == "summarize"][0]
    # (a last turn over twice preserve_recent_tokens is split inside too: "… and N step(s) of the current one")
    assert re.search(r"earlier turn\(s\)( and \d+ step\(s\) of the current one)?, about ", summarized["detail"])
    # the same kept turns, a note of about the same size: its budget follows the calibration,
    # which compares the provider's count with lookout's, and it is made of whole messages, so a
    # budget a fraction of a percent apart can take one message more (217 of 6,150 tokens once,
    # when the repository, which is the sessions' text, changed); the figures after are measure's
    # budget. Whether the last turn is split inside too is decided the same way (its tokens
    # against twice preserve_recent_tokens, through the calibration): a last turn at that line
    # is split in one run and kept whole in the other (12,849 tokens, once, when the repository
    # changed); then the turns are still the same and the summary holds that turn's first step
    kept, full_kept = summarized["items"][0], [s for s in full["stages"] if s["stage"] == "summarize"][0]["items"][0]
    assert (kept["summarized_turns"], kept["kept_turns"]) == (full_kept["summarized_turns"], full_kept["kept_turns"])
    # (its note, which then holds those steps too, is the longer; both end within the target)
    if kept["inside_turn"] == full_kept["inside_turn"]:
        assert kept["kept_from_line"] == full_kept["kept_from_line"] and kept["kept_tokens"] == full_kept["kept_tokens"]
        assert abs(kept["note_tokens"] / full_kept["note_tokens"] - 1) < 0.05
        assert abs(report["tokens"]["after"] / full["tokens"]["after"] - 1) < 0.01
    else:
        whole, split = (kept, full_kept) if full_kept["inside_turn"] else (full_kept, kept)
        assert split["kept_from_line"] > whole["kept_from_line"] and split["kept_tokens"] < whole["kept_tokens"]
        assert split["summarized_steps"] >= 1 and whole["summarized_steps"] == 0
        assert split["note_tokens"] > whole["note_tokens"]
        assert max(report["tokens"]["after"], full["tokens"]["after"]) <= report["tokens"]["target"]
    measured = run_lookout("measure", "--json", "--isolated", "--budget", "100000", input=out, env=env)
    assert json.loads(measured.stdout)["used"]["tokens"] == report["tokens"]["after"]
    if fmt == "claude-code":  # the lines the summary replaced stay in the file, byte for byte
        assert out.startswith(path.read_bytes().rsplit(b"\n", 200)[0][:1_000_000])

    # a second run with the same settings changes nothing
    again = tmp_path / "again.jsonl"
    again.write_bytes(out)
    out2, second, _, _ = _compact(again, tmp_path)
    assert out2 == out and not second["changed"]


def test_an_automatic_run_not_due_counts_everything(big, tmp_path):
    """A budget the session fits: not due, and the figure is the tokenizer's, not a sample's;
    asked to compact all the same (--force), the summary is certain and its turns are priced."""
    _, report, err, _ = _compact(big["openai"], tmp_path, "--max-tokens", "5M")
    assert not report["changed"] and "not due" in report["reason"]
    assert report["tokenized"]["sampled_items"] == 0 and not report["tokens"]["before_sampled"]
    _, full, _, _ = _compact(big["openai"], tmp_path, "--max-tokens", "5M", "--tokenize-all")
    assert report["tokens"]["before"] == full["tokens"]["before"]
    _, forced, _, _ = _compact(big["openai"], tmp_path, "--max-tokens", "5M", "--force")
    assert forced["changed"] and forced["tokenized"]["sampled_items"] > 500
    assert abs(forced["tokens"]["before"] / full["tokens"]["before"] - 1) < 0.01
