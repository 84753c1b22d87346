"""Property tests: every command, on generated transcripts in every writable format.

For each drawn transcript (claude-code, codex, openai, anthropic; tool pairs, parallel calls
answered out of order, real PNG images, recorded compactions, unknown records and fields, odd
spacing and escapes, CRLF, no final newline) and each command:

- it exits 0 with no traceback;
- calls and results stay paired: ``view.orphans()`` does not grow;
- untouched records keep their bytes (a record whose value did not change is not re-serialised);
- unknown records pass through;
- a second run with the same settings changes nothing;
- ``restore`` after any clearing gives back every input line, byte for byte;
- the context's tokens never grow after ``compact`` or ``clear-images`` (unless the image bytes
  are over the budget or a provider's limit: then bytes, not tokens, decide).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import texts, transcripts
from test_reliability_harness import (
    assert_clean,
    bodies,
    context_tokens,
    fidelity_violations,
    hsettings,
    missing_lines,
    orphan_count,
    records_of,
    run_cli,
    tally,
    workdir,
)

NOW = "2026-01-02T12:00:00Z"
LATER = "2027-01-01T00:00:00Z"  # every generated chat has gone quiet and its cache ran out

# name -> (arguments, what restore must give back: "exact" input, "lines" every input line in
# order, or None when the command clears nothing; whether tokens may not grow)
COMMANDS = {
    "measure": (["measure"], None, False),
    "restore": (["restore"], None, False),
    "prepare-idle": (["prepare-idle", "--min-tokens", "0", "--now", LATER], None, False),
    "prepare-idle-compact": (["prepare-idle", "--min-tokens", "0", "--mode", "compact", "--max-tokens", "2k",
                              "--now", LATER], "lines", True),
    "compact": (["compact", "--force", "--max-tokens", "2k", "--max-tool-output-chars", "300", "--now", NOW],
                "lines", True),
    "compact-prune": (["compact", "--stage", "prune", "--now", NOW], "exact", True),
    "compact-clamp": (["compact", "--stage", "clamp", "--max-tool-output-chars", "200", "--now", NOW], "exact", True),
    "compact-truncate": (["compact", "--force", "--max-tokens", "1k", "--summarizer", "command:false",
                          "--on-failure", "truncate", "--now", NOW], "lines", True),
    "clear-images": (["clear-images", "--budget", "100", "--keep-recent", "1"], "exact", True),
    "clear-images-repair": (["clear-images", "--repair", "--provider", "anthropic"], "exact", True),
    "mentions": (["mentions", "--all"], None, False),
    "memory-inject": (["memory", "inject"], None, False),
    "memory-learn": (["memory", "learn"], None, False),
}

# Known failures in modules other engineers own, each pinned by a strict xfail test in
# test_reliability_regressions.py. A known (command, property[, format]) is counted, not failed,
# so the properties keep guarding everything else; LOOKOUT_STRICT_PROPERTIES=1 fails on them too.
# Remove an entry when its regression test starts to pass (XPASS).
KNOWN: dict[tuple, str] = {}
STRICT = bool(os.environ.get("LOOKOUT_STRICT_PROPERTIES"))


def holds(ok: bool, name: str, prop: str, fmt: str, message: str) -> None:
    """Assert a property, unless it is a known failure pinned elsewhere (counted instead)."""
    if ok:
        return
    if not STRICT and ((name, prop) in KNOWN or (name, prop, fmt) in KNOWN):
        tally("known failures met")
        return
    raise AssertionError(message)


MENTION_PROMPTS = st.one_of(
    texts(max_size=60),
    st.sampled_from([
        "read @notes.txt please", "compare @src/a.py#L1-2 with @notes.txt", "list @src/",
        "what is in @\"my file.txt\"", "@missing.txt is gone", "look at @../outside.txt",
        "remember that the API tests need Docker running", "# always use tabs in Makefiles",
        "remember: prefer small pull requests", "see @pixel.png",
    ]),
)


def _workspace(root: Path) -> Path:
    """A project folder for mentions and memory: a few files, an image, a secret outside."""
    import base64

    from strategies import png_base64

    ws = root / "ws"
    if not ws.exists():
        (ws / "src").mkdir(parents=True)
        (ws / "notes.txt").write_text("first line\nsecond line\nthird line\n")
        (ws / "src" / "a.py").write_text("def a():\n    return 1\n")
        (ws / "my file.txt").write_text("spaces in the name\n")
        (ws / "pixel.png").write_bytes(base64.b64decode(png_base64(4, 3, (0, 128, 255))))
        (root / "outside.txt").write_text("outside the workspace\n")
    return ws


def _prepare(name: str, ws: Path, monkeypatch) -> None:
    # small thresholds so that prune has something to do on small transcripts
    monkeypatch.setenv("LOOKOUT_COMPACTION_PRUNE_PROTECT_TOKENS", "50")
    monkeypatch.setenv("LOOKOUT_COMPACTION_PRUNE_MINIMUM_TOKENS", "1")
    if name == "memory-inject":
        with workdir(ws):
            run_cli(["memory", "save", "-q", "The API tests need Docker running"])


SIDE_EFFECTS = ("compact", "compact-prune", "compact-clamp", "compact-truncate", "clear-images",
                "clear-images-repair", "mentions", "memory-learn", "memory-inject", "restore", "prepare-idle",
                "prepare-idle-compact")


def _files(*folders: str | None) -> dict[str, bytes]:
    found = {}
    for folder in folders:
        if folder and os.path.isdir(folder):
            for path in Path(folder).rglob("*"):
                if path.is_file():
                    found[str(path)] = path.read_bytes()
    return found


def check_command(name: str, data: bytes, fmt: str, ws: Path) -> bytes:
    args, restores, tokens_fall = COMMANDS[name]
    tally("cases generated")
    with workdir(ws):
        if name in SIDE_EFFECTS:  # --dry-run writes nothing and passes the input through
            folders = (os.environ.get("LOOKOUT_SAVE_DIR"), os.environ.get("XDG_DATA_HOME"))
            before = _files(*folders)
            dry = run_cli([*args, "--dry-run", "-q"], data)
            tally("command runs")
            assert_clean(dry, args)
            assert dry.code == 0 and dry.out == data, f"{name} --dry-run changed the transcript"
            assert _files(*folders) == before, f"{name} --dry-run wrote files"
        first = run_cli([*args, "-q"], data)
        tally("command runs")
        assert_clean(first, args)
        assert first.code == 0, f"{name}: exit {first.code}: {first.err}"
        out = first.out

        # calls and results stay paired
        assert orphan_count(out, fmt) <= orphan_count(data, fmt), f"{name} left a call without its result"
        # untouched records keep their bytes; unknown records pass through
        assert fidelity_violations(data, out) == []
        unknown = [r.body for r in records_of(data) if r.data and str(r.data.get("type", "")).startswith(
            ("lookout-future", "lookout-test-unknown", "future_record"))]
        if restores != "lines":  # a rewritten message list may fold them into the saved part
            assert missing_lines(unknown, bodies(out)) == [], f"{name} dropped an unknown record"
        if restores is None and name not in ("mentions", "memory-inject", "memory-learn"):
            assert out == data, f"{name} changed a transcript it only reads"

        # a second run changes nothing
        second = run_cli([*args, "-q"], out)
        tally("command runs")
        assert_clean(second, args)
        holds(second.code == 0 and second.out == out, name, "idempotent", fmt, f"{name} is not idempotent")

        # restore gives the content back (an input that already carries restore markers is
        # restored further back than itself: the pipeline test checks that case)
        if restores is not None and b"lookout-restore:" not in data:
            back = run_cli(["restore", "-q"], out)
            tally("command runs")
            assert back.code == 0, back.err
            if restores == "exact":
                holds(bodies(back.out) == bodies(data), name, "restore", fmt,
                      f"restore after {name} did not give the input back")
            else:
                holds(missing_lines(bodies(data), bodies(back.out)) == [], name, "restore", fmt,
                      f"restore after {name} lost lines")

        # tokens never grow
        if tokens_fall:
            before, after = context_tokens(data, fmt), context_tokens(out, fmt)
            holds(after <= before, name, "tokens", fmt, f"{name} grew the context from {before} to {after} tokens")
    return out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_properties(name, tmp_path, monkeypatch):
    ws = _workspace(tmp_path)
    _prepare(name, ws, monkeypatch)
    prompts = MENTION_PROMPTS if name in ("mentions", "memory-learn", "memory-inject") else None

    @hsettings(6)
    @given(case=transcripts(prompts=prompts))
    def prop(case):
        fmt, data, _conv = case
        check_command(name, data, fmt, ws)

    prop()


@hsettings(4)
@given(case=transcripts(), order=st.permutations(["compact-clamp", "clear-images", "mentions", "memory-inject"]))
def test_pipelines_compose_and_restore(case, order, tmp_path_factory):
    """Commands chained in any order keep the properties; restore at the end undoes every
    clearing (nothing cleared by one command is lost by the next)."""
    import os

    fmt, data, _conv = case
    root = tmp_path_factory.mktemp("pipe")
    ws = _workspace(root)
    os.environ["LOOKOUT_SAVE_DIR"] = str(root / "saved")
    current = data
    for name in order:
        current = check_command(name, current, fmt, ws)
    with workdir(ws):
        back = run_cli(["restore", "-q"], current)
    assert back.code == 0
    holds(missing_lines(bodies(data), bodies(back.out)) == [], "clear-images", "restore", fmt,
          "restore at the end of a pipeline lost lines")
