"""`compact --strategy summarize`, offline and against an OpenAI-compatible server on loopback."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from tests.fakes import ChatHandler, serve_chat
from tests.integration.cli.runner import fails, json_out, ok
from tests.integration.cli.test_compaction import make_session


@pytest.fixture
def chat_server() -> Iterator[tuple[str, type[ChatHandler]]]:
    with serve_chat() as served:
        yield served


def test_compact_with_the_offline_summarizer_writes_one_digest_per_loop(db_url):
    session_id = make_session(db_url)
    data = json_out(ok(db_url, "compact", session_id, "--strategy", "summarize", "--json"))
    assert data["blocks"]
    for block in data["blocks"]:
        assert block["strategy"] == "summarize"
        assert block["keep_compacted"]["messages"] >= 1
    text = ok(db_url, "context", session_id, "--budget", "32000", "--format", "openai").stdout
    messages = json.loads(text)
    summaries = [m for m in messages if "[CONTEXT SUMMARY" in str(m.get("content"))]
    assert summaries, "the compacted sections reach the model as framed summaries"
    assert all("[END OF CONTEXT SUMMARY]" in m["content"] for m in summaries)
    # No run of consecutive same-role summary messages.
    assert not [
        (a, b)
        for a, b in itertools.pairwise(messages)
        if a["role"] == b["role"] and a in summaries and b in summaries
    ]


def test_compact_with_a_summarizer_url_asks_the_server(db_url, chat_server):
    url, handler = chat_server
    session_id = make_session(db_url)
    data = json_out(
        ok(
            db_url,
            "compact",
            session_id,
            "--summarizer-url",
            url,
            "--summarizer-model",
            "loopback-model",
            "--summarizer-key-env",
            "SESSIONSTORE_TEST_NO_SUCH_KEY",
            "--json",
        )
    )
    assert handler.received
    assert all(r["path"] == "/v1/chat/completions" for r in handler.received)
    assert handler.received[0]["body"]["model"] == "loopback-model"
    assert {block["strategy"] for block in data["blocks"]} == {"summarize"}
    context = ok(db_url, "context", session_id, "--budget", "32000", "--format", "text").stdout
    assert "Finish the migration of the payment module." in context


def test_an_unreachable_summarizer_writes_nothing_and_says_why(db_url, chat_server):
    url, handler = chat_server
    handler.status = 503
    session_id = make_session(db_url)
    result = fails(
        db_url,
        "compact",
        session_id,
        "--summarizer-url",
        url,
        "--summarizer-model",
        "m",
        "--summarizer-key-env",
        "SESSIONSTORE_TEST_NO_SUCH_KEY",
    )
    assert "503" in result.stderr or "unavailable" in result.stderr.lower()
    blocks = json_out(ok(db_url, "audit", session_id, "--json"))
    assert all(loop["block_id"] is None for loop in blocks["loops"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--summarizer-url", "http://127.0.0.1:9"], "--summarizer-model"),
        (["--strategy", "default", "--focus", "tests"], "--focus needs --strategy summarize"),
        # The seed's one line a turn, asked for by name, takes no model.
        (
            ["--strategy", "default", "--summarizer-url", "http://127.0.0.1:9"],
            "--summarizer-url needs --strategy summarize, not 'default'",
        ),
    ],
)
def test_summarizer_options_are_checked(db_url, args, message):
    session_id = make_session(db_url)
    assert message in fails(db_url, "compact", session_id, *args).stderr


def test_the_audit_shows_the_loops_the_session_digest_stands_for(db_url):
    session_id = make_session(db_url)
    ok(db_url, "compact", session_id)
    data = json_out(ok(db_url, "audit", session_id, "--json"))
    assert data["digest"] is not None
    folded = data["digest"]["folded_loop_ids"]
    assert folded == [loop["loop_id"] for loop in data["loops"][: len(folded)]]
    text = ok(db_url, "audit", session_id, env={"COLUMNS": "160"}).stdout
    assert "digest" in text
    context = ok(db_url, "context", session_id, "--budget", "8000", "--format", "text").stdout
    assert "── 1. user · session digest (the loops before the scope)" in context
    assert "sources: digest 1, " in context
    assert f"stands for the {len(folded)} loop(s)" in text
