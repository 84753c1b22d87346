"""Configuration is checked like the flags, in every layer (issue 31): the user's file (or
$LOOKOUT_CONFIG), the project's .lookout.toml and LOOKOUT_* variables. Each error is one line,
exit 2, naming the file or variable and the key; real runs of the installed lookout."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import run_lookout

from lookout_cli.settings import OTHER_VARIABLES, SETTINGS, VARIABLES

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path) -> Path:
    """A working folder two levels under the project's root (.lookout.toml is found upward)."""
    folder = tmp_path / "proj" / "src" / "deep"
    folder.mkdir(parents=True)
    return folder


def write_layer(layer: str, text: str, project: Path, env: dict) -> Path:
    """Put ``text`` in the config file of ``layer``; returns that file."""
    if layer == "user":
        path = Path(env["XDG_CONFIG_HOME"]) / "lookout" / "config.toml"
    elif layer == "LOOKOUT_CONFIG":
        path = project.parent.parent.parent / "elsewhere.toml"
        env["LOOKOUT_CONFIG"] = str(path)
    else:
        path = project.parent.parent / ".lookout.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def one_error(done) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lookout: error: "), lines
    assert "Invalid value for" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("layer", ["user", "LOOKOUT_CONFIG", "project"])
@pytest.mark.parametrize("text, said", [
    ("tail_turn = 3\n", "unknown key 'tail_turn' (did you mean 'compaction.tail_turns'?)"),
    ("[compaction]\ntail_turn = 3\n", "unknown key 'compaction.tail_turn' (did you mean 'compaction.tail_turns'?)"),
    ("[compacton]\ntail_turns = 3\n", "unknown key 'compacton.tail_turns' (did you mean 'compaction.tail_turns'?)"),
    ("model = 42\n", "model: 42 is not text"),
    ("[meter]\namber = 150\n", "meter.amber: a percentage must be above 0 and at most 100, got 150"),
    ("[compaction]\ntail_turns = 0\n", "compaction.tail_turns: 0 must be 1 or more"),  # as --tail-turns 0
    ("[compaction]\nprune = \"sometimes\"\n", "compaction.prune: 'sometimes' is not true or false (also yes/no, on/off, 1/0)"),
    ("[idle]\nmode = \"later\"\n", "idle.mode: 'later' is not prepare, compact or off"),
    ("[models.mine]\ncontext_windw = 1000\n", "models: mine: unknown field 'context_windw'"),
])
def test_a_wrong_file_is_refused_naming_the_file_and_key(session, project, layer, text, said):
    env = dict(os.environ)
    path = write_layer(layer, text, project, env)
    line = one_error(run_lookout("measure", "-q", "--no-cache", str(session), cwd=project, env=env))
    assert line == f"lookout: error: {path}: {said}"


@pytest.mark.parametrize("variable, value, said", [
    ("LOOKOUT_COMPACTION_TAIL_TURNS", "0", "compaction.tail_turns: 0 must be 1 or more"),
    ("LOOKOUT_METER_AMBER", "150", "meter.amber: a percentage must be above 0 and at most 100, got 150"),
    ("LOOKOUT_BUDGET", "lots", "budget: not a number: 'lots'"),
    ("LOOKOUT_MEASURE_JOBS", "0", "measure.jobs: 0 must be 1 or more"),
])
def test_a_wrong_variable_is_refused_naming_it(session, variable, value, said):
    line = one_error(run_lookout("measure", "-q", "--no-cache", str(session), env={**os.environ, variable: value}))
    assert line.startswith(f"lookout: error: {variable}: {said}")


def test_a_config_error_is_not_a_flag_error(session, project):
    """images.budget flowed into the --budget option's error: 'Invalid value for --budget'."""
    env = dict(os.environ)
    path = write_layer("project", '[images]\nbudget = "lots"\n', project, env)
    line = one_error(run_lookout("clear-images", str(session), cwd=project, env=env))
    assert line.startswith(f"lookout: error: {path}: images.budget: not a number: 'lots'")
    line = one_error(run_lookout("clear-images", str(session), env={**os.environ, "LOOKOUT_IMAGES_BUDGET": "lots"}))
    assert line.startswith("lookout: error: LOOKOUT_IMAGES_BUDGET: images.budget: not a number: 'lots'")


def test_a_missing_LOOKOUT_CONFIG_is_an_error(session, tmp_path):
    missing = tmp_path / "no-such.toml"
    line = one_error(run_lookout("measure", "-q", str(session), env={**os.environ, "LOOKOUT_CONFIG": str(missing)}))
    assert line == f"lookout: error: LOOKOUT_CONFIG: {missing}: no such file"


@pytest.mark.parametrize("word", ["0", "false", "no", "off", "FALSE"])
def test_LOOKOUT_NO_CONFIG_0_keeps_config_on(session, project, word):
    env = dict(os.environ, LOOKOUT_NO_CONFIG=word)
    write_layer("project", "budget = 50000\n", project, env)
    report = json.loads(run_lookout("measure", "--json", str(session), cwd=project, env=env).stdout)
    assert report["budget"]["budget"] == 50_000


def test_LOOKOUT_NO_CONFIG_takes_true_or_false(session, project):
    env = dict(os.environ)
    write_layer("project", "tail_turn = 3\n", project, env)
    assert run_lookout("measure", "-q", str(session), cwd=project, env={**env, "LOOKOUT_NO_CONFIG": "yes"}).returncode == 0
    line = one_error(run_lookout("measure", "-q", str(session), cwd=project, env={**env, "LOOKOUT_NO_CONFIG": "maybe"}))
    assert line.startswith("lookout: error: LOOKOUT_NO_CONFIG: 'maybe' is not true or false")


def test_an_unknown_variable_is_a_warning_with_the_nearest_name(session):
    done = run_lookout("measure", "--no-cache", str(session), env={**os.environ, "LOOKOUT_COMPACTION_TAIL_TURN": "3"})
    assert done.returncode == 0
    assert (b"lookout: warning: LOOKOUT_COMPACTION_TAIL_TURN is not a lookout setting: ignored "
            b"(did you mean 'LOOKOUT_COMPACTION_TAIL_TURNS'?)") in done.stderr.splitlines()


def test_lookouts_own_variables_are_not_warned_about(session, tmp_path):
    """What prepare-idle gives its hooks, the git hook's settings, where files live: a hook
    that runs lookout again must not be told these are unknown."""
    (tmp_path / "empty.toml").write_text("")
    env = {**os.environ, **{name: "x" for name in (
        "LOOKOUT_HOOK", "LOOKOUT_TRANSCRIPT", "LOOKOUT_SESSION", "LOOKOUT_CHAT_MODEL", "LOOKOUT_TIER",
        "LOOKOUT_TOKENS", "LOOKOUT_STATE", "LOOKOUT_LAST_RESPONSE", "LOOKOUT_EXPIRES", "LOOKOUT_READS_LEFT",
        "LOOKOUT_PING_COST", "LOOKOUT_COLD_COST", "LOOKOUT_SUMMARY_FILE", "LOOKOUT_FAIL_AT", "LOOKOUT_TRANSCRIPTS",
        "LOOKOUT_HOST")}}
    env.update(LOOKOUT_NO_CONFIG="false", LOOKOUT_DEBUG="", LOOKOUT_NOW="2026-01-01T00:00:00Z",
               LOOKOUT_DATA_DIR=str(tmp_path / "data"), LOOKOUT_CACHE_DIR=str(tmp_path / "cache"),
               LOOKOUT_CONFIG=str(tmp_path / "empty.toml"), LOOKOUT_SAVE_DIR=str(tmp_path / "saved"))
    done = run_lookout("measure", "--estimate", str(session), env=env)  # no tokenizer in that cache folder
    assert done.returncode == 0 and b"warning" not in done.stderr, done.stderr


def test_every_variable_the_code_reads_is_known():
    """A LOOKOUT_* name in lookout's code or hooks is a setting's variable or one of OTHER_VARIABLES."""
    named = set()
    for folder in ("lookout_cli", "integrations"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", "") and "__pycache__" not in path.parts:
                text = path.read_text(errors="replace")
                named |= set(re.findall(r"""["'{$]\{?(LOOKOUT_[A-Z0-9_]*[A-Z0-9])\b""", text))
    assert named and named <= set(VARIABLES) | OTHER_VARIABLES, named - set(VARIABLES) - OTHER_VARIABLES


def test_every_key_the_code_reads_is_in_the_table():
    read = set()
    for path in (ROOT / "lookout_cli").rglob("*.py"):
        text = path.read_text()
        read |= set(re.findall(r"""\.(?:setting|number|flag)\(\s*"([a-z][a-z_.]*)""", text))
        read |= set(re.findall(r"""config\.get\(\s*"([a-z][a-z_.]*)""", text))
    assert len(read) > 40 and read <= set(SETTINGS), read - set(SETTINGS)


def test_a_secret_in_a_wrong_value_is_not_echoed(session, project):
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    env = dict(os.environ)
    write_layer("project", f'[compaction]\ntimeout = "{key}"\n', project, env)
    line = one_error(run_lookout("measure", "-q", str(session), cwd=project, env=env))
    assert "compaction.timeout" in line and key not in line
    line = one_error(run_lookout("measure", "-q", str(session), env={**os.environ, "LOOKOUT_MEASURE_JOBS": key}))
    assert "LOOKOUT_MEASURE_JOBS" in line and key not in line


def readme_config() -> str:
    """The TOML example of the README's Configuration section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Configuration"):]
    return re.search(r"```toml\n(.*?)```", section, re.DOTALL).group(1)


EVERY_KEY = """\
model = "claude-sonnet-4-5"
budget = "80%"
max_tool_output_chars = 30000

[compaction]
auto = true
threshold_percent = 80
reserved = 20000
prune = "yes"
tail_turns = 3
preserve_recent_tokens = 8000
summary_tokens = 20000
prune_protect_tokens = 40000
prune_minimum_tokens = 20000
tokenize_all = false
jobs = 1
on_failure = "stop"
summarizer = "embedded"
model = "claude-haiku-4-5"
base_url = "https://example.invalid/v1"
api_key_env = "MY_KEY"
timeout = 60

[images]
budget = "16MB"
keep_recent = 5

[measure]
model = "claude-sonnet-4-5"
estimate = false
cache = true
jobs = 1

[meter]
amber = 70
red = "85%"

[mentions]
max_mentions = 20
max_chars = 100000
max_images = 5
max_files = 20
max_bytes = 1000000
workspace_entries = 200
max_image_side = 1568
allow_secret = [".env.example"]

[memory]
save_everywhere = "only_me"
read_everywhere = true

[idle]
mode = "prepare"
cache_ttl = "5m"
min_tokens = 100000
lead = 60
ping_margin = 30
on_ping = "true"
on_prepare = "true"
hook_timeout = 120

[idle.daily_resets]
anthropic = ["07:00"]

[models."my-model"]
base = "claude-sonnet-4-5"
context_window = "150k"
"""


@pytest.mark.parametrize("text", [readme_config(), EVERY_KEY], ids=["readme", "every-key"])
def test_a_valid_config_still_works_in_every_command(session, project, text, tmp_path):
    env = dict(os.environ)
    write_layer("user", f'save_dir = "{tmp_path / "saved"}"\n' + text, project, env)
    write_layer("project", f'[mentions]\nroot = "{project}"\n', project, env)
    for command in (["measure", "-q"], ["compact", "--check"], ["clear-images", "--check"],
                    ["mentions", "--check"], ["prepare-idle", "--json"], ["memory", "list"]):
        done = run_lookout(*command, *([] if command[0] == "memory" else [str(session)]), cwd=project, env=env)
        assert done.returncode in (0, 1) and b"error" not in done.stderr, (command, done.stderr)
