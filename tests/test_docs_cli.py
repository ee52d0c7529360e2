"""Every command's help is its docstring, and every docstring ends with a working example."""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from sessionstore.cli import main


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            yield from walk(subcommand(command, name), (*path, name))


def subcommand(group: click.Group, name: str) -> click.Command:
    command = group.get_command(click.Context(group), name)
    assert command is not None, name
    return command


COMMANDS = list(walk(main))


def resolve(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = subcommand(command, name)
    return command


def example_block(command: click.Command) -> list[str]:
    """Return the lines of the help's last paragraph, which must be a `\\b` example."""
    assert command.help, "no help text"
    last = inspect.cleandoc(command.help).rsplit("\n\n", 1)[-1]
    lines = last.splitlines()
    assert lines[0] == "\b", "the help does not end with a \\b block"
    assert lines[1] in ("Example:", "Examples:")
    return [line.strip() for line in lines[2:]]


def test_the_cli_has_the_documented_commands():
    assert {" ".join(path) for path in COMMANDS} == {
        "",
        "audit",
        "compact",
        "context",
        "db",
        "db check",
        "db current",
        "db distribute",
        "db upgrade",
        "db verify",
        "demo",
        "export",
        "import",
        "mcp",
        "search",
        "sessions",
        "sessions delete",
        "sessions list",
        "sessions purge",
        "sessions show",
        "trajectories",
        "trajectories compress",
    }


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "sessionstore")
def test_every_command_has_help_ending_in_an_example(path):
    command = resolve(path)
    examples = example_block(command)

    assert examples
    for example in examples:
        assert "sessionstore" in example
    # The rendered help shows the example with its line breaks.
    result = CliRunner().invoke(main, [*path, "-h"])
    assert result.exit_code == 0, result.output
    assert examples[0] in result.stdout


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "sessionstore")
def test_examples_name_real_commands_and_options(path):
    """Each example parses: its commands exist and take its options.

    `--help` is eager, so appended to an example it shows the help of the command the
    example names once every option has parsed, before any argument is checked.
    """
    for example in example_block(resolve(path)):
        for invocation in example.split(">>")[0].split("||"):
            words = shlex.split(invocation)
            words = words[words.index("sessionstore") + 1 :]
            result = CliRunner().invoke(main, [*words, "--help"])
            assert result.exit_code == 0, f"{example}: {result.output}"
            named = [word for word in words if word in {p[-1] for p in COMMANDS if p}]
            assert result.stdout.startswith(f"Usage: sessionstore {' '.join(named)}".rstrip())


def test_every_command_is_in_the_cli_guide() -> None:
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "cli.md").read_text()
    for path in COMMANDS:
        if path:
            assert f"sessionstore {' '.join(path)}" in guide, path
