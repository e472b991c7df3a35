"""Plug-ins of the simulated world: symmetric memory, device kernels (Triton), inline CUDA.

The world's core (the launcher, the ops mode, the engine) imports none of them, so that each can import the
core without an import circle. A plug-in registers itself when its module is imported (pkbsim/plugins.py
imports pkb's three); the launcher installs every registered one for the length of a run, and each rank's
ops mode shows it the rank's tensor ops if it asks to see them (`OpsWatch`).

State a plug-in keeps per world or per rank is declared once, as a `WorldState` or `RankState` in the
module that owns it, and made on first use: a world built without the launcher (a test) has it too.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from pkbsim.world.context import RankContext
    from pkbsim.world.patching import Patches
    from pkbsim.world.world import World

S = TypeVar("S")


class WorldState(Generic[S]):
    """A plug-in's state in each world (`world.plugin_states`), made by `make(world)` on first use."""

    def __init__(self, make: Callable[[World], S]):
        self.make = make

    def of(self, world: World) -> S:
        st = world.plugin_states.get(self)
        if st is None:
            with world.lock:  # rank threads may ask at once: one state per world
                st = world.plugin_states.get(self)
                if st is None:
                    st = world.plugin_states[self] = self.make(world)
        return st


class RankState(Generic[S]):
    """A plug-in's state on each rank (`ctx.plugin_states`), made by `make()` on first use. Only the rank's
    own thread asks for it: no lock."""

    def __init__(self, make: Callable[[], S]):
        self.make = make

    def of(self, ctx: RankContext) -> S:
        st = ctx.plugin_states.get(self)
        if st is None:
            st = ctx.plugin_states[self] = self.make()
        return st


class OpsWatch(Protocol):
    """What a plug-in sees of every tensor op a rank runs while the rank's ops mode is on (ops_mode.py)."""

    def before(self, ctx: RankContext, reads: list, writes: list, what: str) -> None:
        """Before the op touches memory; may end the run (SimAbort)."""

    def after(self, ctx: RankContext, writes: list) -> None:
        """After the op wrote `writes`."""

    def peer_bytes(self, ctx: RankContext, tensors: list) -> dict[int, int]:
        """Bytes of `tensors` in other ranks' memory, per rank (the compute trace's peer traffic)."""


@dataclass(frozen=True)
class Plugin:
    name: str
    # patches the process for one run (`simulated_process`); restoring the patches uninstalls it
    install: Callable[[Patches], None]
    ops: OpsWatch | None = None


_registered: dict[str, Plugin] = {}


def register(plugin: Plugin) -> Plugin:
    """Add `plugin` to every later run (under its name: a module imported twice replaces, never doubles)."""
    _registered[plugin.name] = plugin
    return plugin


def registered() -> tuple[Plugin, ...]:
    return tuple(_registered.values())
