"""Reuse distance of a rank's torch ops: the bytes the rank moved (its ops' and collectives' traffic, as its
trace records them: RankTrace.moved) since an op's inputs were last read or written. The timing engine compares
it with the GPU's L2 (pkbsim.timing.compute): a small kernel whose inputs were touched a few MB ago waits L2
round trips, one that reads what a multi-GB kernel has since pushed out waits HBM round trips. On an H200 a
gather of one logit a row took 4.4 us warm and 9.6 us right after a 512 MiB read
(benchmarks/results/small_op_context_h200.json).

Storages are told apart by comms.storage_key (views share it); a device kernel's buffers (Triton, inline CUDA)
are not tracked, so a torch op reading what one wrote goes by its own last torch touch."""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.world.comms import storage_key


@dataclass
class ReuseTracker:
    """Per rank: when (in bytes moved) each storage was last touched."""
    last: dict[int, int] = field(default_factory=dict)

    def distance(self, moved: int, reads) -> int:
        """The most bytes moved since any line of `reads` was last touched, 0 for an op that reads nothing. An
        input the traced program never touched (made outside it) was touched before the program began: at
        least everything the program moved since."""
        return max((moved - self.last.get(storage_key(t), 0) for t in reads), default=0)

    def touch(self, moved: int, tensors, op_bytes: int) -> None:
        """An op that moved `op_bytes` and ended at `moved` touched `tensors`: it streamed its bytes in order, so
        its first lines are that much older than its last. A column of a 4 GB tensor that a kernel has just
        written is as cold as that kernel was large (on an H200 the vocab solution's column of its
        log-softmax output, subtracted right after, took 4.99 us, 2.26 predicted as warm), where a gather
        that touched a few lines of it leaves them warm."""
        for t in tensors:
            self.last[storage_key(t)] = moved - op_bytes
