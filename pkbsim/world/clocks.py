"""Vector clocks over ranks: happens-before for host-level synchronisation.

Collectives join the clocks of their members; a receive or a signal-pad wait acquires the clock the
sender or signaller released. Two events are concurrent when neither clock is <= the other.
"""
from __future__ import annotations


class VectorClocks:
    def __init__(self, n: int):
        self.vc = [[0] * n for _ in range(n)]

    def snapshot(self, rank: int) -> tuple[int, ...]:
        """Advance rank's own clock (a new event) and return the clock of that event."""
        self.vc[rank][rank] += 1
        return tuple(self.vc[rank])

    def acquire(self, rank: int, released: tuple[int, ...]) -> None:
        mine = self.vc[rank]
        for i, v in enumerate(released):
            if v > mine[i]:
                mine[i] = v
        mine[rank] += 1

    def join(self, ranks: list[int]) -> None:
        merged = [max(self.vc[r][i] for r in ranks) for i in range(len(self.vc))]
        for r in ranks:
            self.vc[r] = list(merged)
            self.vc[r][r] += 1


def happens_before(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b))
