"""A tiny real HTTP server for the client's tests: answers a scripted sequence and records each request."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# The package under test, from this checkout (not an installed copy).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def envelope(data: Any, **meta: Any) -> dict[str, Any]:
    return {"data": data, "meta": {"request_id": "req_test", **meta}}


def error(code: str, message: str, details: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or []}, "meta": {"request_id": "req_err"}}


class LocalServer:
    """Serves ``answers`` in order (the last one again once they run out) on 127.0.0.1."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.received: list[Received] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                server.received.append(
                    Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw) if raw else None)
                )
                answer = server.answers.pop(0) if len(server.answers) > 1 else server.answers[0]
                payload = b"" if answer.body is None else answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> LocalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
