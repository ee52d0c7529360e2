"""`trajectories compress` on lines built to break it (issue 17, item 5).

A line nested 3,000 to 50,000 levels deep raised `RecursionError` (a traceback); it is a
numbered, clear error now, and OUT.jsonl is not touched. A line just shallow enough to
parse is compressed or refused cleanly, whichever the stack allows, and what is written
reads back as the input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.cli.runner import cli, fails, ok

PREVIOUS = '{"messages": []}\n'


def _nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def _parse_limit() -> int:
    """The deepest value `json.loads` reads here (it depends on the recursion limit)."""
    low, high = 1, 100_000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            json.loads(_nested(middle, "list"))
        except RecursionError:
            high = middle - 1
        else:
            low = middle
    return low


@pytest.mark.parametrize("depth", [3_000, 10_000, 50_000])
@pytest.mark.parametrize(
    "template",
    [
        "{nested}",
        '{{"extra": {nested}, "messages": [{{"role": "user", "content": "hi"}}]}}',
        '{{"messages": [{{"role": "user", "content": {nested}}}]}}',
        '{{"conversations": [{{"from": "human", "value": "hi", "x": {nested}}}]}}',
    ],
    ids=["whole-line", "extra-key", "message-content", "sharegpt-turn"],
)
@pytest.mark.parametrize("kind", ["list", "object"])
def test_a_deeply_nested_line_is_a_numbered_error(
    tmp_path: Path, depth: int, template: str, kind: str
) -> None:
    source = tmp_path / "in.jsonl"
    good = '{"messages": [{"role": "user", "content": "fine"}]}'
    source.write_text(good + "\n" + template.format(nested=_nested(depth, kind)) + "\n")
    target = tmp_path / "out.jsonl"
    target.write_text(PREVIOUS)
    result = fails(None, "trajectories", "compress", str(source), str(target))
    assert result.exit_code == 1
    assert "line 2" in result.stderr
    assert "nested too deeply" in result.stderr
    assert target.read_text() == PREVIOUS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_lines_near_the_parser_limit_are_written_exactly_or_refused_cleanly(tmp_path: Path) -> None:
    limit = _parse_limit()
    outcomes = set()
    for depth in range(max(limit - 60, 1), limit + 2, 6):
        for kind in ("list", "object"):
            tail = ', "messages": [{"role": "user", "content": "hi"}]}'
            line = '{"extra": ' + _nested(depth, kind) + tail
            source = tmp_path / "in.jsonl"
            source.write_text(line + "\n")
            target = tmp_path / "out.jsonl"
            result = cli(None, "trajectories", "compress", str(source), str(target), "--json")
            assert "Traceback" not in result.output
            if result.exit_code == 0:
                assert target.read_text() == line + "\n"
                outcomes.add("written")
            else:
                assert result.exit_code == 1
                assert "nested too deeply" in result.stderr
                outcomes.add("refused")
    assert "written" in outcomes


def test_a_deep_tool_call_in_a_sharegpt_turn_is_kept_as_text(tmp_path: Path) -> None:
    call = '<tool_call>{"name": "f", "arguments": ' + _nested(5_000, "list") + "}</tool_call>"
    record = {
        "conversations": [
            {"from": "human", "value": "hi"},
            {"from": "gpt", "value": call},
        ]
    }
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record) + "\n")
    target = tmp_path / "out.jsonl"
    ok(None, "trajectories", "compress", str(source), str(target))
    assert json.loads(target.read_text()) == record


def test_a_lone_surrogate_in_another_key_reads_back_the_same(tmp_path: Path) -> None:
    line = '{"note": "\\ud800 half a pair", "messages": [{"role": "user", "content": "hi"}]}'
    source = tmp_path / "in.jsonl"
    source.write_text(line + "\n")
    target = tmp_path / "out.jsonl"
    ok(None, "trajectories", "compress", str(source), str(target))
    assert json.loads(target.read_text()) == json.loads(line)
