"""The summarizer's API key is printed nowhere and stored nowhere (issue 17, item 4).

A server answers 2xx without `choices`, with an error text that repeats the key; the
key looks like no provider's, so only its value can find it. `compact` fails cleanly:
the key is not in what the CLI prints, nor in the failed compaction's event
(`sessionstore_compaction_events.details`), nor in any block. A server that writes the key
into its digest gets it redacted before anything is stored.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from sessionstore import SessionStore
from tests.fakes import ChatHandler
from tests.integration.cli.runner import cli, ok, with_store
from tests.integration.cli.test_compaction import make_session

KEY_ENV = "SESSIONSTORE_TEST_LEAKED_KEY"
KEY = "corp.gateway.7f3a19c2b8e4d6a0-internal"


class _EchoingHandler(ChatHandler):
    """Answers 200 with no choices and the key in the error, or a digest holding the key."""

    digest = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append({"path": self.path, "body": body})
        key = self.headers["Authorization"].removeprefix("Bearer ")
        answer: dict[str, Any] = (
            {
                "model": f"model-{key}",
                "choices": [{"message": {"content": f"## Active Task\nUse key {key}."}}],
            }
            if self.digest
            else {"error": {"message": f"quota exceeded for key {key}"}}
        )
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def echoing() -> Iterator[tuple[str, type[_EchoingHandler]]]:
    handler = type("Handler", (_EchoingHandler,), {"received": [], "digest": False})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


async def _stored_text(store: SessionStore, session_id: str) -> str:
    events = await store.list_compaction_events(session_id)
    loops = await store.list_loops(session_id)
    blocks = [b for loop in loops for b in await store.block_history(session_id, loop.id)]
    return json.dumps(
        [e.model_dump(mode="json") for e in events] + [b.model_dump(mode="json") for b in blocks]
    )


def _compact(db_url: str, url: str, session_id: str) -> Any:
    return cli(
        db_url,
        "compact",
        session_id,
        "--summarizer-url",
        url,
        "--summarizer-model",
        "m",
        "--summarizer-key-env",
        KEY_ENV,
        env={KEY_ENV: KEY},
    )


def test_a_key_echoed_in_an_error_is_printed_and_stored_nowhere(db_url, echoing):
    url, handler = echoing
    session_id = make_session(db_url)
    result = _compact(db_url, url, session_id)
    assert result.exit_code == 1
    assert handler.received  # the server was asked, with the key
    assert "quota exceeded for key [REDACTED]" in result.stderr
    assert KEY not in result.output
    stored = with_store(db_url, _stored_text, session_id)
    assert '"failed"' in stored  # the failed compaction was recorded ...
    assert "[REDACTED]" in stored
    assert KEY not in stored  # ... without the key


def test_a_key_written_into_the_digest_is_stored_redacted(db_url, echoing):
    url, handler = echoing
    handler.digest = True
    session_id = make_session(db_url)
    result = _compact(db_url, url, session_id)
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    stored = with_store(db_url, _stored_text, session_id)
    assert "Use key [REDACTED]." in stored
    assert KEY not in stored
    context = ok(db_url, "context", session_id, "--budget", "32000", "--json").stdout
    assert KEY not in context
