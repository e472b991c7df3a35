"""A write to a flag a peer spins on waits for that peer's read, and the check and the write are one step.

CI once saw ThunderKittens' barrier (wait for exactly N) hang at 8 ranks in 1 run of ~12: two ranks both
passed the check while the poller still held the count it had read, and both arrivals landed on it (N, N+1)
before it read N. Here two writers race on one word with the first held inside its write.
"""
import ctypes
import threading
import time
from types import SimpleNamespace

from pkbsim.device import spin_handoff
from pkbsim.world.world import World


def _word(value: int):
    buf = ctypes.c_int32(value)
    lo = ctypes.addressof(buf)
    return buf, lo, lo + 4


def test_a_second_writer_waits_for_the_poller_to_read_the_first_write():
    world = World(3)
    poller, first, second = (SimpleNamespace(world=world, rank=r) for r in range(3))
    buf, lo, hi = _word(7)
    spin_handoff.polled(poller, lo, hi, ctypes.string_at(lo, 4))  # the poller read 7 and spins on it
    landed: list[int] = []
    inside, go_on = threading.Event(), threading.Event()

    def write(writer, value: int, hold: bool) -> None:
        with spin_handoff.writing(writer, [(lo, hi, 0)], "site", "kernel"):
            if hold:
                inside.set()
                go_on.wait(5)
            buf.value = value
            landed.append(value)

    t1 = threading.Thread(target=write, args=(first, 8, True))
    t1.start()
    assert inside.wait(5)
    t2 = threading.Thread(target=write, args=(second, 9, False))
    t2.start()
    time.sleep(0.2)
    assert landed == []  # the second writer did not pass the check while the first was between check and write
    go_on.set()
    t1.join(5)
    t2.join(0.3)
    assert landed == [8] and t2.is_alive()  # 8 has not been read: the second arrival must not cover it
    spin_handoff.polled(poller, lo, hi, ctypes.string_at(lo, 4))
    t2.join(5)
    assert landed == [8, 9]


def test_a_write_nobody_has_yet_to_read_goes_ahead():
    world = World(2)
    poller, writer = SimpleNamespace(world=world, rank=0), SimpleNamespace(world=world, rank=1)
    buf, lo, hi = _word(7)
    spin_handoff.polled(poller, lo, hi, ctypes.string_at(lo, 4))
    with spin_handoff.writing(writer, [(lo, hi, 0)], "site", "kernel"):
        buf.value = 8  # the poller has read 7, the value the word holds: nothing to wait for
    assert buf.value == 8
