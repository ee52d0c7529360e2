"""The command line refuses input over a limit cleanly (issue 10, defects 4, 5 and 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli.runner import SMALL, fails, ok, with_store, write_jsonl

HUGE = "99999999999999999999"


def _imported(db_url: str, tmp_path: Path) -> None:
    ok(db_url, "import", str(write_jsonl(tmp_path / "small.jsonl", [SMALL])))


@pytest.mark.parametrize(
    "args",
    [
        ["compact", "small-1", "--loop", HUGE],
        ["context", "small-1", "--loop", HUGE, "--budget", "1000"],
        ["audit", "small-1", "--loop", HUGE],
        ["export", "small-1", "--loop", HUGE],
        ["context", "small-1", "--budget", "1000", "--as-of", HUGE],
        ["context", "small-1", "--budget", "1000", "--as-of", str(2**31)],
        ["context", "small-1", "--budget", "1000", "--scope", HUGE],
        ["context", "small-1", "--budget", "1000", "--scope", str(2**63 - 1)],
        ["compact", "small-1", "--scope", HUGE],
        ["audit", "small-1", "--scope", str(2**31)],
    ],
)
def test_a_number_out_of_range_is_a_usage_error(db_url, tmp_path, args):
    _imported(db_url, tmp_path)
    result = fails(db_url, *args)
    assert result.exit_code == 2
    assert "range" in result.stderr


@pytest.mark.parametrize("name", ["", "x" * 65, "a b", "\u00e9t\u00e9"])
def test_an_invalid_overlay_is_a_usage_error_and_writes_nothing(db_url, tmp_path, name):
    _imported(db_url, tmp_path)
    for args in (["compact", "small-1"], ["context", "small-1", "--budget", "1000"]):
        result = fails(db_url, *args, "--overlay", name)
        assert result.exit_code == 2
        assert "overlay" in result.stderr
    events = with_store(db_url, lambda s: s.list_compaction_events("small-1"))
    assert events == []


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            json.dumps({**SMALL, "id": "m"})[:-1]
            + ', "metadata": '
            + '{"a": ' * 1000
            + "{}"
            + "}" * 1001,
            "nested too deeply",
        ),
        ({**SMALL, "id": "m", "metadata": _deep(100)}, "metadata is nested deeper than 64"),
        (
            {
                "id": "t",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": json.dumps(_deep(200))},
                            }
                        ],
                    },
                ],
            },
            "arguments",
        ),
        ('{"id": "x", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
        (json.dumps({**SMALL, "id": "s", "title": "\ud800"}), "title"),
        ({**SMALL, "id": "s", "title": "t" * 513}, "title"),
        ({**SMALL, "id": "n", "metadata": {"x": float("nan")}}, "metadata"),
    ],
)
def test_an_import_line_over_a_limit_is_a_numbered_error(db_url, tmp_path, line, reason):
    good = {**SMALL, "id": "good"}
    path = write_jsonl(tmp_path / "bad.jsonl", [good, line])
    result = fails(db_url, "import", str(path))
    assert result.exit_code == 1
    assert "line 2:" in result.stderr
    assert reason in result.stderr
    assert [s.id for s in with_store(db_url, lambda s: s.list_sessions()).items] == ["good"]
