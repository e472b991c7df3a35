"""Finds task modules (one per task, in the category sub-packages) and checks their declarations.

Adding a task is adding one module: nothing here lists tasks by name.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from tasks.api import CATEGORIES, Output, WorldSizes


class TaskError(Exception):
    """A task module that breaks the Task API, or a task that does not exist."""


@dataclass(frozen=True)
class TaskSpec:
    slug: str
    id: int
    title: str
    category: str
    origin: str
    world_sizes: WorldSizes
    sizes: dict
    outputs: tuple[Output, ...]
    make_inputs: Callable
    reference: Callable
    speed_of_light: Callable | None
    module: ModuleType

    def supports(self, world_size: int) -> bool:
        return self.world_sizes(world_size)

    @property
    def signature(self) -> str:
        return f"solution{inspect.signature(self.reference)}"

    def summary(self) -> dict:
        return {"id": self.id, "slug": self.slug, "title": self.title, "category": self.category,
                "origin": self.origin, "world_sizes": self.world_sizes.describe(), "signature": self.signature,
                "sizes": self.sizes, "outputs": [{"name": o.name, "dtype": str(o.dtype).replace("torch.", ""),
                                                  "rtol": o.tolerance[0], "atol": o.tolerance[1], "nan": o.nan}
                                                 for o in self.outputs]}


_REQUIRED = {"SLUG": str, "ID": int, "TITLE": str, "CATEGORY": str, "ORIGIN": str, "WORLD_SIZES": WorldSizes,
             "SIZES": dict, "OUTPUTS": list}


def load(module: ModuleType) -> TaskSpec:
    name = module.__name__
    for attr, kind in _REQUIRED.items():
        if not isinstance(getattr(module, attr, None), kind):
            raise TaskError(f"{name}: {attr} must be a {kind.__name__} (see tasks/api.py for the Task API)")
    for fn in ("make_inputs", "reference"):
        if not callable(getattr(module, fn, None)):
            raise TaskError(f"{name}: define {fn}(...) (see tasks/api.py)")
    if module.CATEGORY not in CATEGORIES:
        raise TaskError(f"{name}: CATEGORY {module.CATEGORY!r} is not one of {', '.join(CATEGORIES)}")
    if set(module.SIZES) != {"screen", "full"}:
        raise TaskError(f"{name}: SIZES must have exactly the presets 'screen' and 'full'")
    if not module.OUTPUTS or not all(isinstance(o, Output) for o in module.OUTPUTS):
        raise TaskError(f"{name}: OUTPUTS must list one tasks.api.Output per returned tensor")
    sol = getattr(module, "speed_of_light", None)
    return TaskSpec(module.SLUG, module.ID, module.TITLE, module.CATEGORY, module.ORIGIN, module.WORLD_SIZES,
                    module.SIZES, tuple(module.OUTPUTS), module.make_inputs, module.reference,
                    sol if callable(sol) else None, module)


@lru_cache(maxsize=1)
def all_tasks() -> tuple[TaskSpec, ...]:
    specs: list[TaskSpec] = []
    for category in CATEGORIES:
        try:
            pkg = importlib.import_module(f"tasks.{category}")
        except ModuleNotFoundError:
            continue
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                spec = load(importlib.import_module(f"tasks.{category}.{info.name}"))
                if spec.category != category:
                    raise TaskError(f"{spec.module.__name__}: CATEGORY {spec.category!r} but it lives in "
                                    f"tasks/{category}/; move the module or fix CATEGORY")
                specs.append(spec)
    for key in ("slug", "id"):
        seen: dict = {}
        for s in specs:
            other = seen.setdefault(getattr(s, key), s)
            if other is not s:
                raise TaskError(f"{s.module.__name__} and {other.module.__name__} share the {key} "
                                f"{getattr(s, key)!r}; {key}s must be unique")
    return tuple(sorted(specs, key=lambda s: s.id))


_external: dict[str, TaskSpec] = {}


def register_external(spec: TaskSpec) -> None:
    """Make a task defined outside this package (e.g. a ParallelKernelBench problem) reachable by get()."""
    _external[spec.slug] = spec


def get(key: str | int) -> TaskSpec:
    """A task by slug or numeric id; an unknown key raises TaskError with the closest slugs."""
    if key in _external:
        return _external[key]
    specs = all_tasks()
    for s in specs:
        if s.slug == key or str(s.id) == str(key):
            return s
    near = difflib.get_close_matches(str(key), [s.slug for s in specs], n=3)
    hint = f"; did you mean {', '.join(near)}?" if near else "; `pkb tasks` lists them"
    raise TaskError(f"unknown task {key!r}{hint}")
