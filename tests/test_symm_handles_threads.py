"""The world's registry of symmetric-memory handles is shared by the ranks, which are threads: one rank lists
the handles (to map its memory for a kernel) while another adds one (its rendezvous). The list must be taken
whole, never raise (pkbsim/symm/allocations.py SymmState.live_handles)."""
import sys
import threading

from pkbsim.symm.allocations import SymmState


class _Handle:
    pass


def _listing_while_another_rank_adds(read) -> list[BaseException]:
    st, kept, raised = SymmState(), [], []
    kept += [_Handle() for _ in range(20000)]
    for h in kept:
        st.all_handles.add(h)
    stop = threading.Event()

    def adder():   # another rank's rendezvous, as track_handle does it: under the lock
        while not stop.is_set():
            h = _Handle()
            kept.append(h)
            with st.lock:
                st.all_handles.add(h)

    def lister():   # until the first error, or 60 listings
        try:
            for _ in range(60):
                read(st)
        except RuntimeError as e:
            raised.append(e)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads as often as the interpreter will
    try:
        t = threading.Thread(target=adder)
        t.start()
        lister()
        stop.set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    return raised


def test_listing_the_handles_while_another_rank_adds_one_never_raises():
    assert _listing_while_another_rank_adds(SymmState.live_handles) == []


def test_its_buggy_twin_a_bare_iteration_of_the_weak_set_raises():
    raised = _listing_while_another_rank_adds(lambda st: list(st.all_handles))
    assert raised and "changed size during iteration" in str(raised[0]), raised
