"""A fake OpenAI-compatible chat server on loopback, for the summarizer's tests and the docs."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIGEST = (
    "## Active Task\nFinish the migration of the payment module.\n\n## Relevant Files\n- src/pay.py"
)


class ChatHandler(BaseHTTPRequestHandler):
    """Answers every POST with `DIGEST` (or an error when `status` is not 200) and records it."""

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


@contextlib.contextmanager
def serve_chat() -> Iterator[tuple[str, type[ChatHandler]]]:
    """Serve on a free loopback port; yield the base URL and the handler class."""
    handler = type("Handler", (ChatHandler,), {"received": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
