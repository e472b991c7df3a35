"""A scripted stand-in for a code model: an OpenAI-compatible chat endpoint on the loopback address (the
standard library's http.server), for `pkb refine`'s tests and its documented transcript.

Its n-th answer in a conversation (n = the assistant turns already in the request, so a retried request gets
the same answer) is `replies[n]`; before answering it can fail on purpose with the HTTP statuses in
`faults`, one per request. Every request is kept (headers and JSON body) for the test to read.

The default script answers an all_reduce prompt with candidates read from the repository's labelled sets: a
deadlocking one (rank 0 skips the collective), a racing one (a one-shot all-reduce over symmetric memory
without its exit barrier), then its fixed twin. `python tests/refine_standin.py` serves it until stopped.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLOCK = os.path.join(HERE, "broken_candidates", "all_reduce__deadlock.py")
RACE = os.path.join(HERE, "broken_candidates", "all_reduce__no_exit_barrier.py")
CORRECT = os.path.join(HERE, "fixed_candidates", "all_reduce__exit_barrier.py")


def fenced(path: str, intro: str) -> str:
    with open(path) as f:
        return f"{intro}\n\n```python\n{f.read()}```\n"


def default_script() -> list[str]:
    return [fenced(DEADLOCK, "Rank 0 already holds its input, so only the other ranks need to reduce:"),
            fenced(RACE, "A one-shot all-reduce over symmetric memory: each rank sums every peer's buffer."),
            fenced(CORRECT, "The race: a rank rewrote its buffer while a peer still read it. A barrier at exit:")]


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, replies: list[str], faults: list[int] = (), port: int = 0, delay: float = 0.0):
        super().__init__(("127.0.0.1", port), _Handler)
        self.replies, self.faults, self.delay = list(replies), list(faults), delay
        self.in_flight = self.most_in_flight = 0  # requests being answered at once, and the most seen
        self.requests: list[dict] = []   # {"headers": {...}, "body": {...}, "status": int}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()

    def answered(self) -> list[dict]:
        """The requests that got a reply (status 200)."""
        return [r for r in self.requests if r["status"] == 200]


class _Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with self.server.lock:
            self.server.in_flight += 1
            self.server.most_in_flight = max(self.server.most_in_flight, self.server.in_flight)
        try:
            reply = self._answer(body)
        finally:
            # the request leaves the count before its reply is sent: once the client has the reply it may send
            # the next, which must not find this one still counted (a loaded machine delays this thread)
            with self.server.lock:
                self.server.in_flight -= 1
        self._send(*reply)

    def _answer(self, body: dict) -> tuple:
        """(status, body, headers) of the reply."""
        time.sleep(self.server.delay)  # a model takes a while: lets concurrent requests overlap
        with self.server.lock:
            fault = self.server.faults.pop(0) if self.server.faults else None
            turn = sum(m.get("role") == "assistant" for m in body.get("messages", []))
            status = fault or (200 if self.path.endswith("/chat/completions") else 404)
            self.server.requests.append({"headers": dict(self.headers), "body": body, "status": status})
        if status != 200:
            return status, {"error": {"message": f"scripted {status}"}}, {"Retry-After": "0"}
        text = self.server.replies[min(turn, len(self.server.replies) - 1)]
        return 200, {"id": f"standin-{turn}", "object": "chat.completion", "model": body.get("model"),
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
                               "completion_tokens": len(text.split())}}, None

    def _send(self, status: int, doc: dict, headers: dict | None = None):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    with StandIn(default_script(), port=port) as s:
        print(f"stand-in model at {s.base_url} (model name: any)", flush=True)
        s.thread.join()
