"""SIMT execution of a batch of CTAs as one numpy vector of lanes.

Every lane has its own program counter. While all live lanes agree (the common case) the group runs
in "uniform" mode on a scalar pc. After a divergent branch it runs the lanes with the lowest pc first,
which reconverges structured control flow at its join point (loops and if/else as nvcc emits them).
Warp-level operations see lanes in groups of 32 (block threads are padded to whole warps).

A group runs as resumable steps: `run(budget)` returns after at most `budget` instructions, so a
scheduler can interleave groups (and, in the multi-rank world, ranks) when a lane spins on memory.
"""
from __future__ import annotations

import numpy as np

from .access import group_regions
from .dtypes import storage
from .errors import KernelHang, MemoryFault, NotSimulated, PtxError
from .ops_async import finish as finish_bulk_stores

PLAIN, BRANCH, EXIT, BARRIER, CALL, RETURN, MBAR_WAIT = range(7)   # MBAR_WAIT: a blocking mbarrier.try_wait
MAX_CALL_DEPTH = 32
SPIN_ROUNDS = 4   # polling-loop iterations without any store before a spinner steps aside


def warps(lanes: np.ndarray) -> int:
    """Warps (32 lanes, whole in every group) with a lane set: a warp's 32 bools are four 8-byte words, or-ed
    (a reduction along an axis of 32 costs several times more)."""
    w = np.ascontiguousarray(lanes, dtype=bool).view(np.uint64).reshape(-1, 4)
    return int(np.count_nonzero(w[:, 0] | w[:, 1] | w[:, 2] | w[:, 3]))


class Decoded:
    __slots__ = ("fn", "guard", "guard_neg", "kind", "loc", "poll_loop", "target", "text")

    def __init__(self, fn, kind, target, guard, guard_neg, loc, text):
        self.fn, self.kind, self.target = fn, kind, target
        self.guard, self.guard_neg, self.loc, self.text = guard, guard_neg, loc, text
        self.poll_loop = False   # a backward branch whose loop polls memory (see kernel.py)


class LaneGroup:
    """State of `len(ctas)` CTAs run together: registers, pcs, shared and local memory."""

    def __init__(self, kernel, launch, ctas: list[tuple[int, int, int]]):
        self.kernel, self.launch, self.code = kernel, launch, kernel.code
        bx, by, bz = launch.block
        threads = bx * by * bz
        per_cta = -(-threads // 32) * 32
        self.per_cta, self.nctas = per_cta, len(ctas)
        n = self.nlanes = per_cta * len(ctas)
        self.regs = {name: np.zeros(n, storage(t)) for name, t in kernel.regs.items()}
        lane_in_cta = np.tile(np.arange(per_cta, dtype=np.uint32), len(ctas))
        self.cta_of_lane = np.repeat(np.arange(len(ctas), dtype=np.uint64), per_cta)
        self.alive = np.tile(np.arange(per_cta) < threads, len(ctas))
        self.waiting = np.zeros(n, bool)
        self.wait_id = np.zeros(n, np.int64)          # which of the 16 barriers a waiting lane is at
        self.wait_count = np.full(n, -1, np.int64)     # its thread count (-1: the whole CTA)
        self.arrivals = np.zeros((16, len(ctas)), np.int64)   # bar.arrive counts per barrier and CTA
        self.red_val = np.zeros(n, bool)               # a waiting lane's predicate at a bar.red
        self.red_specs: dict[tuple[int, int], object] = {}   # (CTA, barrier id) -> the bar.red waited at
        self.pc = np.zeros(n, np.int64)
        self.upc = 0                      # the shared pc while uniform, -1 once divergent
        self.live = None if self.alive.all() else self.alive.copy()
        self.live_warps = warps(self.alive)
        c = np.array(ctas, dtype=np.uint32).reshape(-1, 3)
        lane = lane_in_cta % np.uint32(32)
        self._special = {
            "%tid.x": lane_in_cta % np.uint32(bx), "%tid.y": (lane_in_cta // np.uint32(bx)) % np.uint32(by),
            "%tid.z": lane_in_cta // np.uint32(bx * by),
            "%ntid.x": np.uint32(bx), "%ntid.y": np.uint32(by), "%ntid.z": np.uint32(bz),
            "%ctaid.x": np.repeat(c[:, 0], per_cta), "%ctaid.y": np.repeat(c[:, 1], per_cta),
            "%ctaid.z": np.repeat(c[:, 2], per_cta),
            "%nctaid.x": np.uint32(launch.grid[0]), "%nctaid.y": np.uint32(launch.grid[1]),
            "%nctaid.z": np.uint32(launch.grid[2]),
            "%laneid": lane, "%warpid": lane_in_cta // np.uint32(32), "%nwarpid": np.uint32(per_cta // 32),
            "%smid": np.uint32(0), "%nsmid": np.uint32(132), "%gridid": np.uint64(0),
            "%lanemask_eq": np.uint32(1) << lane,
            "%lanemask_lt": (np.uint32(1) << lane) - np.uint32(1),
            "%lanemask_le": ((np.uint32(1) << lane) - np.uint32(1)) | (np.uint32(1) << lane),
            "%dynamic_smem_size": np.uint32(launch.shared_bytes),
            "%total_smem_size": np.uint32(kernel.static_shared + launch.shared_bytes),
        }
        self._special["%lanemask_ge"] = ~self._special["%lanemask_lt"]
        self._special["%lanemask_gt"] = ~self._special["%lanemask_le"]
        smem = kernel.static_shared + launch.shared_bytes
        self.smem_size = max(smem, 1)
        self.shared = np.zeros(self.smem_size * len(ctas), np.uint8)
        self.local_size = max(kernel.local_size, 1)
        self.local = np.zeros(self.local_size * n, np.uint8)
        self.async_pending: list = []     # cp.async copies not yet committed
        self.async_groups: list = []      # committed groups, oldest first
        self.mbar_wait = np.zeros(n, bool)   # threads blocked in mbarrier.try_wait until an mbarrier changes
        self.bulk_loads: dict = {}        # mbarrier slot -> bulk copies into shared memory it waits for (ops_async)
        self.bulk_stores: dict = {}       # lane -> [pending, committed groups] of bulk copies to global memory
        self.ret_stack = None             # per-lane return addresses, allocated at the first call
        self.depth = np.zeros(n, np.int64)
        self.yield_requested = False      # a spinning thread lets other groups (and ranks) run
        self.spun = False                 # the last run() ended because every thread here spins
        self.parked = np.zeros(n, bool)   # lanes spinning on memory, set aside until something is stored
        self.parked_stores = 0
        self.spins, self.spin_stores = 0, -1
        self._straight = None             # (lanes, their warp count) of a divergent step that may go on straight (_run_straight)
        group_regions(self)

    def special(self, name: str):
        if name in ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo"):
            return np.uint64(self.launch.counters.warp_instructions)
        return self._special[name]

    # --- execution -----------------------------------------------------------------------------
    def run(self, budget: int) -> bool:
        """Execute up to `budget` instructions; True once every lane has exited."""
        code = self.code
        counters = self.launch.counters
        regs = self.regs
        self.spun = False
        try:
            while budget > 0:
                budget -= 1
                if self.upc >= 0:
                    d = code[self.upc]
                    mask = self.live
                    if d.guard is not None:
                        p = regs[d.guard]
                        p = ~p if d.guard_neg else p
                        mask = p if mask is None else p & mask
                        if not mask.any():
                            self.upc += 1
                            counters.warp_instructions += self.live_warps
                            continue
                    counters.warp_instructions += self.live_warps
                    if d.kind == PLAIN:
                        d.fn(self, mask)
                        self.upc += 1
                    elif self._control_uniform(d, mask):
                        return self._finished()
                elif self._step_divergent():
                    return self._finished()
                elif self._straight is not None:
                    budget = self._run_straight(budget)
                if self.yield_requested:
                    self.yield_requested = False
                    self.spun = True
                    return False
            return False
        except (NotSimulated, KernelHang):
            raise
        except MemoryFault as e:
            raise MemoryFault(f"{e} at {self.where()}") from None
        except PtxError:
            raise
        except Exception as e:  # a bug or gap in an instruction's semantics: report, never guess
            raise NotSimulated(f"{self._current().text} ({type(e).__name__}: {e})", self.where()) from None

    def _finished(self) -> bool:
        if self.bulk_stores:
            finish_bulk_stores(self)            # bulk stores still in flight complete with the kernel
        return True

    def _current(self) -> Decoded:
        if self.upc >= 0:
            return self.code[self.upc]
        live = self.alive & ~self.waiting
        return self.code[int(self.pc[live].min())] if live.any() else self.code[0]

    def where(self) -> str:
        return self._current().loc

    def _control_uniform(self, d: Decoded, mask) -> bool:
        live = self.live
        if d.kind == BRANCH:
            if d.poll_loop and self._spinning():
                self.yield_requested = True
            if mask is live or (mask is not None and np.array_equal(mask, self.alive if live is None else live)):
                self.upc = d.target
            else:
                self._diverge()
                self.pc[mask] = d.target
            return False
        if d.kind == EXIT:
            if mask is live:
                self.alive[:] = False
                return True
            self._diverge()
            return self._exit(mask)
        if d.kind == MBAR_WAIT:
            at = self.upc
            blocked = d.fn(self, mask)
            if not blocked.any():
                self.upc += 1
                return False
            self._diverge()
            self.pc[blocked] = at
            self.mbar_wait |= blocked
            return False
        if d.kind == BARRIER:
            if d.fn.plain and (mask is live or np.array_equal(mask, self.alive)):
                self.upc += 1
                return False
            self._diverge()
            self._arrive(self.alive if mask is None else mask, d.fn)
            return False
        lanes = self.alive if mask is None else mask      # CALL or RETURN
        self._diverge()
        self._call_or_return(d, lanes)
        self._maybe_reconverge()
        return False

    def _call_or_return(self, d: Decoded, lanes):
        if d.kind == CALL:
            if self.ret_stack is None:
                self.ret_stack = np.zeros((MAX_CALL_DEPTH, self.nlanes), np.int64)
            depth = self.depth[lanes]
            if (depth >= MAX_CALL_DEPTH).any():
                raise NotSimulated(f"call depth beyond {MAX_CALL_DEPTH}", d.loc)
            self.ret_stack[depth, np.flatnonzero(lanes)] = self.pc[lanes]
            self.depth[lanes] += 1
            self.pc[lanes] = d.target
        else:
            self.depth[lanes] -= 1
            self.pc[lanes] = self.ret_stack[self.depth[lanes], np.flatnonzero(lanes)]

    def _diverge(self):
        self.pc[:] = self.upc + 1
        self.upc = -1

    def _spinning(self) -> bool:
        """True once a polling loop went round several times while nothing was stored anywhere."""
        stores = self.launch.counters.stores
        if stores != self.spin_stores:
            self.spins, self.spin_stores = 0, stores
            return False
        self.spins += 1
        return self.spins >= SPIN_ROUNDS

    def _step_divergent(self) -> bool:
        if self.parked.any() and self.launch.counters.stores != self.parked_stores:
            self.parked[:] = False
        blocked = self.waiting.any() or self.parked.any() or self.mbar_wait.any()
        live = self.alive & ~self.waiting & ~self.parked & ~self.mbar_wait if blocked else self.alive
        if not live.any() and self.parked.any():
            self.parked[:] = False            # everyone here spins: let other groups run first
            self.yield_requested = True
            return False
        if not live.any():
            if self.mbar_wait.any():
                raise KernelHang(self._mbar_hang())
            if self.waiting.any():
                raise KernelHang(f"barrier never opens: every live thread waits at {self.code[int(self.pc[self.waiting].min()) - 1].loc}")
            return True
        if blocked or not live.all():
            m = int(self.pc[live].min())
            group = live & (self.pc == m)
        else:   # every lane runs (the common case): no masked copy of the pcs
            m = int(self.pc.min())
            group = self.pc == m
        d = self.code[m]
        counters = self.launch.counters
        nw = warps(group)
        counters.warp_instructions += nw
        mask = group
        if d.guard is not None:
            p = self.regs[d.guard]
            mask = group & (~p if d.guard_neg else p)
        self.pc += group            # the group's lanes are at m: on to m + 1
        if d.kind == PLAIN:
            if mask.any():
                d.fn(self, mask)
        elif d.kind == MBAR_WAIT:
            if mask.any():
                blocked = d.fn(self, mask)
                self.pc[blocked] = m
                self.mbar_wait |= blocked
        elif d.kind == BRANCH:
            self.pc[mask] = d.target
            if d.poll_loop and mask.any() and self._spinning():
                if (live & ~group).any():
                    self.parked |= mask           # run the other lanes: one of them may set the flag
                    self.parked_stores = self.launch.counters.stores
                else:
                    self.yield_requested = True   # only spinners are left: let other groups (ranks) run
        elif d.kind == EXIT:
            if self._exit(mask):
                return True
        elif d.kind == BARRIER:
            if mask.any():
                self._arrive(mask, d.fn)
        elif mask.any():
            self._call_or_return(d, mask)
        self._maybe_reconverge()
        if d.kind == PLAIN and not blocked and self.upc < 0 and self.code[m + 1].kind == PLAIN:
            self._straight = group, nw   # the run loop goes on with these lanes (_run_straight)
        return False

    def _run_straight(self, budget: int) -> int:
        """Go on with the lanes of the divergent step just taken (a plain instruction, no lane blocked) through the
        plain instructions that follow, while they stay the lowest pc of the live lanes: what further divergent steps
        would do one at a time, without finding the group, counting its warps, moving every pc and looking for
        reconvergence at each step (none can happen before the group reaches another lane's pc). The same
        instructions run with the same masks and budget; the pcs are written once at the end (no instruction reads
        them; an error in one leaves them as a step would). Returns the budget left."""
        group, nw = self._straight
        self._straight = None
        if budget <= 0 or self.yield_requested:
            return budget
        k = int(self.pc[int(np.argmax(group))])    # the group's pc, one past the instruction it ran
        others = np.where(group, np.iinfo(np.int64).max, self.pc)
        stop = int(others.min()) if self.alive.all() else int(others[self.alive].min())   # no lane blocked: live = alive
        code, regs, counters = self.code, self.regs, self.launch.counters
        start = k
        try:
            while budget > 0 and k < stop:
                d = code[k]
                if d.kind != PLAIN:
                    break
                budget -= 1
                counters.warp_instructions += nw
                k += 1
                if d.guard is None:
                    d.fn(self, group)
                else:
                    p = regs[d.guard]
                    mask = group & (~p if d.guard_neg else p)
                    if mask.any():
                        d.fn(self, mask)
                if self.yield_requested:
                    break
        finally:
            if k != start:
                self.pc[group] = k
        if k != start:
            self._maybe_reconverge()
        return budget

    def _mbar_hang(self) -> str:
        at = self.code[int(self.pc[self.mbar_wait].min())].loc
        also = ""
        if self.waiting.any():
            also = f"; others wait at the barrier at {self.code[int(self.pc[self.waiting].min()) - 1].loc}"
        return (f"mbarrier wait never completes: threads wait for an mbarrier phase at {at} that no thread of "
                f"the block can complete (arrivals or transaction bytes missing){also}")

    def _exit(self, mask) -> bool:
        self.alive &= ~mask
        self.waiting &= self.alive
        if not self.alive.any():
            return True
        self.live_warps = warps(self.alive)
        self._open_barriers()          # exited threads no longer hold a barrier closed
        self._maybe_reconverge()
        return False

    def _arrive(self, mask, spec):
        first = int(np.flatnonzero(mask)[0])
        bid = int(np.broadcast_to(spec.bid(self), (self.nlanes,))[first])
        count = -1 if spec.count is None else int(np.broadcast_to(spec.count(self), (self.nlanes,))[first])
        if bid >= 16:
            raise NotSimulated(f"barrier id {bid} (ids are 0..15)", spec.loc)
        if spec.waits:
            self.waiting |= mask
            self.wait_id[mask] = bid
            self.wait_count[mask] = count
            if spec.red:
                self.red_val[mask] = np.broadcast_to(spec.pred(self), (self.nlanes,))[mask]
                for c in np.unique(self.cta_of_lane[mask]):
                    self.red_specs[(int(c), bid)] = spec
        else:
            np.add.at(self.arrivals[bid], self.cta_of_lane[mask].astype(np.int64), 1)
        self._open_barriers()

    def _open_barriers(self):
        """A CTA's barrier opens once every live thread of that CTA waits at it, or, for a barrier
        with a thread count, once that many threads waited or arrived at it."""
        if not self.waiting.any():
            return
        if (self.wait_count[self.waiting] < 0).all() and not self.arrivals.any() and not self.red_specs:
            pending = (self.alive & ~self.waiting).reshape(self.nctas, self.per_cta).any(axis=1)
            self.waiting.reshape(self.nctas, self.per_cta)[~pending] = False
            return
        waiting = self.waiting.reshape(self.nctas, self.per_cta)
        ids, counts = self.wait_id.reshape(waiting.shape), self.wait_count.reshape(waiting.shape)
        alive = self.alive.reshape(waiting.shape)
        for c in np.flatnonzero(waiting.any(axis=1)):
            for bid in np.unique(ids[c][waiting[c]]):
                sel = waiting[c] & (ids[c] == bid)
                need = int(counts[c][sel].max())
                if need < 0:
                    done = not (alive[c] & ~waiting[c]).any()
                else:
                    done = int(sel.sum()) + int(self.arrivals[bid, c]) >= need
                if done:
                    waiting[c][sel] = False
                    self.arrivals[bid, c] = 0
                    spec = self.red_specs.pop((int(c), int(bid)), None)
                    if spec is not None:
                        self._reduce(spec, c, sel)

    def _reduce(self, spec, cta: int, sel) -> None:
        """bar.red's result for the lanes `sel` of CTA `cta` that waited: the count, and or or of their predicates."""
        vals = self.red_val.reshape(self.nctas, self.per_cta)[cta][sel]
        result = {"popc": np.uint32(np.count_nonzero(vals)), "and": np.bool_(vals.all()),
                  "or": np.bool_(vals.any())}[spec.red]
        lanes = np.zeros((self.nctas, self.per_cta), bool)
        lanes[cta] = sel
        spec.dest(self, result, lanes.reshape(-1))

    def _maybe_reconverge(self):
        if self.waiting.any() or self.parked.any() or self.mbar_wait.any():
            return
        if self.alive.all():   # no masked copy: the lowest pc is the highest
            first = int(self.pc.min())
            if first == int(self.pc.max()):
                self.upc, self.live = first, None
            return
        pcs = self.pc[self.alive]
        first = pcs[0]
        if (pcs == first).all():
            self.upc = int(first)
            self.live = self.alive.copy()
