"""Man pages are generated from the click commands: fresh, warning-free, complete."""

from __future__ import annotations

import shutil
import subprocess

import click
import pytest
from conftest import REPO

from lookout_cli import manpage
from lookout_cli.cli import cli


def test_man_pages_are_fresh():
    pages = manpage.pages()
    committed = {p.name: p.read_text() for p in (REPO / "man").glob("*.1")}
    assert set(committed) == set(pages), "run: python -m lookout_cli.manpage man/"
    for name, text in pages.items():
        assert committed[name] == text, f"{name} is stale; run: python -m lookout_cli.manpage man/"


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
@pytest.mark.parametrize("name", sorted(manpage.pages()))
def test_groff_prints_no_warnings(name, tmp_path):
    path = tmp_path / name
    path.write_text(manpage.pages()[name])
    result = subprocess.run(["groff", "-man", "-ww", "-z", str(path)], capture_output=True, text=True)
    assert result.stderr == ""


def test_every_page_has_the_required_sections_and_options():
    pages = manpage.pages()
    ctx = click.Context(cli)
    for command_name in cli.list_commands(ctx):
        text = pages[f"lookout-{command_name}.1"]
        for section in ("NAME", "SYNOPSIS", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"):
            assert f".SH {section}" in text, f"{command_name}: no {section}"
        command = cli.get_command(ctx, command_name)
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert manpage.escape(opt) in text, f"{command_name}: {opt} undocumented"


def test_every_command_has_an_example_in_its_help():
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command.epilog and "lookout" in command.epilog, f"{name} has no example"
