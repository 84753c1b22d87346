"""The hook recipes with the real agents (Claude Code 2.1.328, Codex CLI 0.171.0) against a
loopback model: what lookout answers reaches the requests they send. The hooks run the installed
``lookout`` (its folder first on the agent's PATH). Each agent run takes 2-5 s; they skip when
.ci/agents has not installed the agents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_runs import COMPACT_MARKERS, request_texts, run_claude, run_codex
from conftest import REPO, lookout_exe

from lookout_cli.agents.install import recipe

NOTE = "The deploy script lives in tools/ship.sh"


@pytest.fixture(autouse=True)
def installed_lookout_on_path(monkeypatch):
    """The agents' environment takes PATH from ours: the hooks find this lookout first."""
    folder = Path(lookout_exe()[0]).parent if len(lookout_exe()) == 1 else Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', os.defpath)}")


def save_memory(home: Path, cwd: Path, note: str) -> None:
    """A project memory, saved where the agent's hooks will look (its HOME's XDG data folder)."""
    cwd.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"))
    env.pop("LOOKOUT_SAVE_DIR", None)
    done = subprocess.run([*lookout_exe(), "memory", "save", note], cwd=cwd, env=env, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


def text_of(body: dict) -> str:
    return "\n".join(request_texts(body))


def is_compaction(body: dict) -> bool:
    return any(marker in text_of(body) for marker in COMPACT_MARKERS)


def test_claude_code_memory_compaction_and_resume_with_the_recipe(tmp_path):
    save_memory(tmp_path / "claude-home", tmp_path / "proj", NOTE)
    plain = run_claude(tmp_path, prompt="hello without lookout")
    assert plain.returncode == 0, plain.stderr
    assert NOTE not in text_of(plain.last_request_body())  # without the recipe the model never sees it

    settings = recipe("claude")
    instruction = "Always use tabs in Makefiles, never spaces."
    plugin = REPO / "integrations" / "claude-code-plugin"  # the same hooks as a plugin
    first = run_claude(tmp_path, prompt=instruction, extra_args=("--plugin-dir", str(plugin)))
    assert first.returncode == 0, first.stderr
    assert NOTE in text_of(first.last_request_body())  # a new session starts with the memory

    compact = run_claude(tmp_path, session=first.session_path, prompt="/compact", settings=settings)  # in settings.json
    assert compact.returncode == 0, compact.stderr
    summarizing = [r["body"] for r in compact.requests if is_compaction(r["body"])]
    assert summarizing, [text_of(r["body"])[-300:] for r in compact.requests]
    asked = text_of(summarizing[-1])
    # the agent's own summary request carries lookout's instructions: the user's words, the copy
    assert "Additional Instructions:\nlookout read this conversation" in asked
    assert f'"{instruction}"' in asked and "is saved at" in asked
    saved = Path(asked.split("is saved at ")[1].split(" (JSONL")[0])
    assert instruction in saved.read_text()

    after = run_claude(tmp_path, session=first.session_path, prompt="what next?", settings=settings)
    assert after.returncode == 0, after.stderr
    sent = text_of(after.last_request_body())
    assert "the conversation was just compacted" in sent and str(saved) in sent and f'"{instruction}"' in sent
    assert NOTE in sent  # and on resume the memory is there (once)
    assert sent.count(NOTE) == 1


def test_codex_gets_the_memory_through_its_hooks(tmp_path):
    save_memory(tmp_path / "codex-user", tmp_path / "proj", NOTE)
    run = run_codex(tmp_path, prompt="hello codex", hooks=recipe("codex"))
    assert run.returncode == 0, run.stderr
    assert NOTE in text_of(run.last_request_body())  # a developer message (SessionStart additionalContext)


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_stopped_session_is_compacted_in_place_then_resumed(tmp_path, agent):
    """The resume workflow (README): ``lookout compact -i`` on a session that is not running,
    then ``claude --resume`` / ``codex resume``: the agent starts from lookout's summary."""
    sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
    from bench.generate import generate
    from lookout_cli.compaction.note import PREAMBLE

    # a session long enough to summarize (the shared ones are too short): seeded, made here
    session = tmp_path / f"{agent}.jsonl"
    generate(session, "claude-code" if agent == "claude" else "codex", 0.3)
    before = session.read_bytes()
    done = subprocess.run([*lookout_exe(), "compact", "--force", "-i", str(session)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert session.read_bytes() != before
    run = (run_claude if agent == "claude" else run_codex)(tmp_path, session=session, prompt="go on")
    assert run.returncode == 0, run.stderr
    sent = text_of(run.last_request_body())
    assert PREAMBLE[:60] in sent  # the resumed conversation starts from lookout's summary
    assert len(sent) < len(before) / 2  # and carries far less than the session held
