"""Stored text reaches the operator's terminal as printable text only (issue 17, item 3).

A session whose id, title, metadata, messages and tool outputs hold escape sequences
(clear screen, window title, hyperlinks, colours, 8-bit CSI, carriage returns, bell,
bidirectional overrides) is printed by every command that shows stored text, as rich
tables, plain text and JSON, in a pipe and on a colour terminal. No such character
reaches the output; they are shown as visible escapes (`\\x1b`), and the JSON outputs
still decode to the exact stored text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from sessionstore import (
    AssistantMessage,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.integration.cli.runner import cli, ok, with_store

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;owned\x07"
LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
CSI8 = "\x9b31m"
BIDI = "\u202etxt.exe"
OVERWRITE = "rm -rf /\r# nothing to see"
BELL = "\x07\x08\x7f"
HOSTILE = [CLEAR, TITLE, LINK, CSI8, BIDI, OVERWRITE, BELL]

SESSION = "evil\x1b[2J"
TITLE_TEXT = f"Title {TITLE}{CLEAR}"
USER_TEXT = f"zebrafish please {CLEAR}{CSI8} and {BIDI}"
TOOL_TEXT = f"zebrafish output {LINK}\n{OVERWRITE}\n{BELL}{TITLE}"
ANSWER_TEXT = f"done {TITLE} {BIDI}"

UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\r(?!\n)"
)
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""Rich's own colours, on a colour terminal: the only escapes allowed there."""


async def _seed(store: SessionStore) -> None:
    await store.create_session(
        session_id=SESSION,
        app_name="app",
        user_id="ops",
        title=TITLE_TEXT,
        metadata={"note": f"meta {CSI8}{BIDI}", CLEAR: "key"},
    )
    await store.append_messages(
        SESSION,
        [
            UserMessage(content=USER_TEXT),
            AssistantMessage(
                content=[ToolCall(id="c1", name=f"bash{CLEAR}", arguments={"cmd": f"cat {TITLE}"})]
            ),
            ToolResultMessage(tool_call_id="c1", tool_name=f"bash{CLEAR}", content=TOOL_TEXT),
            AssistantMessage(content=ANSWER_TEXT),
        ],
    )


COMMANDS: list[list[str]] = [
    ["sessions", "list"],
    ["sessions", "show", SESSION],
    ["search", "zebrafish"],
    ["context", SESSION, "--budget", "100000"],
    ["context", SESSION, "--budget", "100000", "--format", "openai"],
    ["audit", SESSION],
    ["audit", SESSION, "--html", "-"],
    ["export", SESSION],
    ["compact", SESSION, "--scope", "0", "--keep-first", "0", "--keep-recent", "0"],
    ["sessions", "list", "--json"],
    ["sessions", "show", SESSION, "--json"],
    ["search", "zebrafish", "--json"],
    ["context", SESSION, "--budget", "100000", "--json"],
    ["audit", SESSION, "--json"],
    ["export", SESSION, "--compact"],
    ["compact", SESSION, "--json"],
    ["sessions", "show", "no such\x1b]0;session\x07"],
]


def _assert_printable(output: str, *, colour: bool) -> None:
    shown = SGR.sub("", output) if colour else output
    found = UNSAFE.search(shown)
    assert found is None, f"{found.group()!r} at {found.start()}: {shown[: found.start()][-80:]!r}"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize("colour", [False, True], ids=["pipe", "colour-terminal"])
def test_every_command_prints_stored_text_as_printable_text(db_url, colour):
    ok(db_url, "db", "upgrade")
    with_store(db_url, _seed)
    env = {"COLUMNS": "160", **({"FORCE_COLOR": "1", "TERM": "xterm-256color"} if colour else {})}
    for args in COMMANDS:
        result = cli(db_url, *args, env=env)
        _assert_printable(result.stdout, colour=colour)
        _assert_printable(result.stderr, colour=colour)
        if args[0] == "sessions" and args[-1].startswith("no such"):
            assert result.exit_code == 1
            assert "no such\\x1b]0;session\\x07" in result.stderr
            continue
        assert result.exit_code == 0, (args, result.output)
        if "--json" in args or "--compact" in args or "openai" in args:
            # The JSON is exact: every stored text decodes back as it was stored.
            strings = set(_strings(json.loads(result.stdout)))
            if args[0] == "export":
                assert {USER_TEXT, TOOL_TEXT, ANSWER_TEXT} <= strings
            if args[0] == "context":
                assert {USER_TEXT, TOOL_TEXT, ANSWER_TEXT} & strings
        elif args[0] in ("context", "audit", "search", "sessions"):
            # The escapes are shown, not dropped.
            assert "\\x1b" in result.stdout, args


def test_the_printable_rule_keeps_text_and_shows_escapes():
    from sessionstore.cli._render import printable

    assert printable("plain, accentué, 表, emoji 👩‍💻\n\tindented") == (
        "plain, accentué, 表, emoji 👩‍💻\n\tindented"
    )
    assert printable(CLEAR) == "\\x1b[2J\\x1b[H"
    assert printable(CSI8 + BIDI) == "\\x9b31m\\u202etxt.exe"
    assert printable("a\rb\x00c") == "a\\x0db\\x00c"
    assert printable("windows\r\nline ends\r\n") == "windows\r\nline ends\r\n"
