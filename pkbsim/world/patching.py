"""Reversible monkeypatches: set attributes (or mapping entries) for the length of a run, restore them
afterwards."""
from __future__ import annotations

from typing import Any

_MISSING = object()


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, Any, Any, bool]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        had = hasattr(obj, name)
        self._saved.append((obj, name, getattr(obj, name, None), had))
        setattr(obj, name, value)

    def set_own(self, cls: type, name: str, value: Any) -> None:
        """Give a class its own attribute over an inherited one; restore removes it again."""
        if name in vars(cls):
            self.set(cls, name, value)
        else:
            self._saved.append((cls, name, None, False))
            setattr(cls, name, value)

    def set_item(self, mapping: dict, key: Any, value: Any) -> None:
        self._saved.append((mapping, key, mapping.get(key, _MISSING), None))
        mapping[key] = value

    def restore(self) -> None:
        for obj, name, old, had in reversed(self._saved):
            if had is None:  # a mapping entry
                if old is _MISSING:
                    obj.pop(name, None)
                else:
                    obj[name] = old
            elif had:
                setattr(obj, name, old)
            else:
                delattr(obj, name)
        self._saved.clear()
