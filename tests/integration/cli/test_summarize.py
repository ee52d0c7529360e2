"""`compact --strategy summarize`, offline and against an OpenAI-compatible server on loopback."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.integration.cli.runner import fails, json_out, ok
from tests.integration.cli.test_compaction import make_session

DIGEST = (
    "## Active Task\nFinish the migration of the payment module.\n\n## Relevant Files\n- src/pay.py"
)


class _Handler(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append({"path": self.path, "body": body})
        if self.status != 200:
            payload = json.dumps({"error": {"message": "down for maintenance"}}).encode()
        else:
            payload = json.dumps(
                {
                    "model": "loopback-model",
                    "choices": [{"message": {"role": "assistant", "content": DIGEST}}],
                }
            ).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def chat_server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"received": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


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
