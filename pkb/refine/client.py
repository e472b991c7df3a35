"""An OpenAI-compatible chat endpoint over HTTP (the standard library's urllib): one request per call,
retried with exponential back-off on HTTP 429 and 5xx and on connection failures, with a bound on the
requests in flight shared by every task of a run. The API key comes from the environment and is sent,
never stored."""
from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from pkb.errors import UsageError

RETRY_STATUS = {429, 500, 502, 503, 504}


class ModelError(UsageError):
    """The endpoint failed in a way retrying does not fix (or kept failing): one line naming the fix."""


@dataclass(frozen=True)
class Message:
    role: str      # system, user, assistant
    content: str


@dataclass
class Reply:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    retries: int = 0


@dataclass
class ChatClient:
    base_url: str                    # e.g. https://api.openai.com/v1 (".../chat/completions" is appended)
    model: str
    api_key: str | None = None       # from the environment, by the command; never written anywhere
    timeout: float = 600.0           # per request
    retries: int = 5                 # further attempts after a 429/5xx/connection failure
    backoff: float = 2.0             # seconds before the first retry; doubled each time (with jitter)
    max_backoff: float = 60.0
    temperature: float | None = None
    max_in_flight: int = 4           # requests at once, over every task of the run
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self):
        self._slots = threading.BoundedSemaphore(max(1, self.max_in_flight))

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def complete(self, messages: list[Message]) -> Reply:
        body = {"model": self.model, "messages": [{"role": m.role, "content": m.content} for m in messages]}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        t0 = time.perf_counter()
        for attempt in range(self.retries + 1):
            wait = None
            try:
                with self._slots:
                    req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
                    with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                        answer = resp.read()
                return _reply(answer, time.perf_counter() - t0, attempt, self.url)
            except urllib.error.HTTPError as e:
                detail = _error_detail(e)
                if e.code not in RETRY_STATUS:
                    raise ModelError(_fatal(e.code, detail, self)) from None
                wait, last = _retry_after(e), f"HTTP {e.code}{': ' + detail if detail else ''}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                reason = getattr(e, "reason", e)
                last = f"no answer ({reason})"
            if attempt < self.retries:
                delay = min(self.max_backoff, self.backoff * 2 ** attempt) * (0.75 + 0.5 * random.random())
                time.sleep(delay if wait is None else min(self.max_backoff, wait))
        raise ModelError(f"{self.url} failed {self.retries + 1} times, last with {last}; check --base-url and the "
                         f"endpoint's status, or raise --retries")


def _reply(raw: bytes, seconds: float, retries: int, url: str) -> Reply:
    try:
        doc = json.loads(raw)
        text = doc["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError(f"{url} did not answer as an OpenAI-compatible chat endpoint (no choices[0].message."
                         f"content); pass the endpoint's base URL (ending in /v1) to --base-url") from None
    usage = doc.get("usage") or {}
    return Reply(text or "", usage.get("prompt_tokens"), usage.get("completion_tokens"), round(seconds, 3), retries)


def _error_detail(e: urllib.error.HTTPError) -> str:
    try:
        doc = json.loads(e.read() or b"{}")
        err = doc.get("error", doc)
        msg = err.get("message") if isinstance(err, dict) else str(err)
        return " ".join(str(msg or "").split())[:200]
    except (ValueError, OSError, AttributeError):
        return ""


def _retry_after(e: urllib.error.HTTPError) -> float | None:
    try:
        return max(0.0, float(e.headers.get("Retry-After", "")))
    except (TypeError, ValueError):
        return None


def _fatal(code: int, detail: str, client: ChatClient) -> str:
    said = f"HTTP {code}" + (f" ({detail})" if detail else "")
    if code in (401, 403):
        return f"{client.url} refused the request: {said}; set the API key in the environment (--api-key-env names it)"
    if code == 404:
        return f"{client.url} answered {said}; check --base-url (it should end in /v1) and --model"
    return f"{client.url} answered {said}; check --model and the endpoint"
