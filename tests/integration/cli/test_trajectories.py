"""`sessionstore trajectories compress`: a small JSONL, the real transcripts, bad lines, --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.cli.runner import SMALL, fails, json_out, ok, write_jsonl


def long_sharegpt(n: int) -> dict[str, object]:
    turns = [
        {"from": "system", "value": "agent"},
        {"from": "human", "value": "task"},
        {"from": "gpt", "value": "ok"},
    ]
    for i in range(n):
        turns += [{"from": "gpt", "value": f"run {i}"}, {"from": "tool", "value": "o" * 800}]
    turns.append({"from": "gpt", "value": "done"})
    return {"id": f"s{n}", "conversations": turns}


def test_compress_small_file_keeps_order_and_reports(tmp_path: Path) -> None:
    records = [long_sharegpt(20), SMALL, long_sharegpt(40)]
    source = write_jsonl(tmp_path / "in.jsonl", records)
    target = tmp_path / "out.jsonl"
    report = json_out(
        ok(
            None,
            "trajectories",
            "compress",
            str(source),
            str(target),
            "--target-max-tokens",
            "2000",
            "--workers",
            "2",
            "--json",
        )
    )
    out = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["id"] for r in out] == ["s20", "small-1", "s40"]
    assert out[1] == SMALL
    assert out[0]["conversations"][3]["from"] == "human"
    assert report["trajectories"] == 3
    assert report["compressed"] == 2
    assert report["unchanged"] == 1
    assert report["still_over_target"] == 0
    assert report["tokens_after"] < report["tokens_before"]
    assert not list(tmp_path.glob(".out.jsonl.*"))


def test_a_bad_line_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [SMALL, "{not json", SMALL])
    target = tmp_path / "out.jsonl"
    result = fails(None, "trajectories", "compress", str(source), str(target))
    assert "line 2" in result.output
    assert not target.exists()
    assert list(tmp_path.iterdir()) == [source]


def test_a_record_that_is_no_trajectory_is_named(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [SMALL, {"id": "x", "turns": []}])
    result = fails(None, "trajectories", "compress", str(source), str(tmp_path / "o.jsonl"))
    assert "line 2" in result.output
    assert "neither 'conversations'" in result.output


def test_summarizer_url_needs_a_model(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [SMALL])
    result = fails(
        None,
        "trajectories",
        "compress",
        str(source),
        str(tmp_path / "o.jsonl"),
        "--summarizer-url",
        "http://127.0.0.1:9",
    )
    assert "--summarizer-model" in result.output


def test_real_transcripts(dataset_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "all.jsonl"
    lines: list[str] = []
    for path in sorted(dataset_dir.glob("*.jsonl")):
        lines += path.read_text(encoding="utf-8").splitlines()
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    report = json_out(
        ok(
            None,
            "trajectories",
            "compress",
            str(source),
            str(target),
            "--target-max-tokens",
            "8000",
            "--json",
        )
    )
    out = [json.loads(line) for line in target.read_text().splitlines()]
    originals = [json.loads(line) for line in lines]
    assert [r["id"] for r in out] == [r["id"] for r in originals]
    assert report["trajectories"] == len(originals)
    assert report["compressed"] >= 1
    for before, after in zip(originals, out, strict=True):
        assert {k: v for k, v in before.items() if k != "messages"} == {
            k: v for k, v in after.items() if k != "messages"
        }
        assert after["messages"][-4:] == before["messages"][-4:]
        assert after["messages"][0] == before["messages"][0]
    assert report["still_over_target"] == len(report["over_target_lines"])


def to_sharegpt(record: dict[str, Any]) -> dict[str, Any]:
    """Hermes-style ShareGPT: tool calls as `<tool_call>` blocks in the gpt turn."""
    names = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}
    turns = []
    for message in record["messages"]:
        value = message.get("content") or ""
        for call in message.get("tool_calls") or []:
            function = call["function"]
            block = {"name": function["name"], "arguments": json.loads(function["arguments"])}
            value += f"\n<tool_call>{json.dumps(block)}</tool_call>"
        turns.append({"from": names[message["role"]], "value": value})
    rest = {k: v for k, v in record.items() if k != "messages"}
    return {**rest, "conversations": turns}


def test_real_transcripts_as_sharegpt(dataset_dir: Path, tmp_path: Path) -> None:
    originals = [
        to_sharegpt(json.loads(line))
        for path in sorted(dataset_dir.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    source = write_jsonl(tmp_path / "in.jsonl", originals)
    target = tmp_path / "out.jsonl"
    report = json_out(ok(None, "trajectories", "compress", str(source), str(target), "--json"))
    out = [json.loads(line) for line in target.read_text().splitlines()]
    assert report["compressed"] >= 1
    assert report["tokens_after"] < report["tokens_before"]
    for before, after in zip(originals, out, strict=True):
        turns = after["conversations"]
        assert turns[-4:] == before["conversations"][-4:]
        summaries = [t for t in turns if t["value"].startswith("[CONTEXT SUMMARY")]
        assert len(summaries) == (0 if turns == before["conversations"] else 1)
        if summaries:
            assert summaries[0]["from"] == "human"
