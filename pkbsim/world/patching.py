"""Reversible monkeypatches: set attributes for the length of a run, restore them afterwards."""
from __future__ import annotations

from typing import Any


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        had = hasattr(obj, name)
        self._saved.append((obj, name, getattr(obj, name, None), had))
        setattr(obj, name, value)

    def restore(self) -> None:
        for obj, name, old, had in reversed(self._saved):
            if had:
                setattr(obj, name, old)
            else:
                delattr(obj, name)
        self._saved.clear()
