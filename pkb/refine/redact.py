"""Secrets kept out of what `pkb refine` stores, prints and sends back to the model.

Inside the sandbox a candidate sees no variable whose name says it holds a secret (candidate_sandbox), but
under --no-sandbox it sees this process's whole environment, and what it prints or raises comes back in the
screen's result: the feedback, the --json output, the store. So every value of a variable named like a
secret (candidate_sandbox.supervisor.secret: KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL), and the API key the
run was given whatever its variable's name, is replaced by `[redacted $NAME]` in those texts.
"""
from __future__ import annotations

import os
import threading

from candidate_sandbox.supervisor import secret

MIN_LENGTH = 6          # shorter values ("1", "yes") would blank ordinary words
_extra: dict[str, str] = {}   # value -> variable name: secrets named otherwise (the run's --api-key-env)
_lock = threading.Lock()


def register(name: str) -> None:
    """Treat the value of variable `name` as a secret too (the run's API key, whatever its variable's name)."""
    value = os.environ.get(name)
    if value and len(value) >= MIN_LENGTH:
        with _lock:
            _extra[value] = name


def secrets() -> dict[str, str]:
    """value -> the name of the variable holding it, longest value first."""
    found = {v: k for k, v in os.environ.items() if secret(k) and len(v) >= MIN_LENGTH}
    with _lock:
        found.update(_extra)
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


def redact(text, known: dict[str, str] | None = None):
    """`text` with every secret value replaced; anything other than a str is returned as it is."""
    if not isinstance(text, str) or not text:
        return text
    for value, name in (secrets() if known is None else known).items():
        if value in text:
            text = text.replace(value, f"[redacted ${name}]")
    return text


def redact_json(obj, known: dict[str, str] | None = None):
    """The same over every string of a JSON-like value (dicts, lists, strings; keys too)."""
    known = secrets() if known is None else known
    if isinstance(obj, str):
        return redact(obj, known)
    if isinstance(obj, dict):
        return {redact(k, known): redact_json(v, known) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_json(v, known) for v in obj]
    return obj
