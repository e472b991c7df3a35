"""Attack: on import, write over another candidate's timeline in the folder where pkb writes timelines, and
plant a FIFO where this candidate's own timeline will go (the screen would block writing it). The folder's
path is public (a batch's sits beside its results file); the test hands it over in PKB_PROBE_TIMELINE.
What each attempt met goes to descriptor 2 (the simulated world keeps a program's prints), so the test knows the attempts ran. The call itself is honest."""
import os

import torch.distributed as dist

_target = os.environ.get("PKB_PROBE_TIMELINE", "")
if _target:
    _folder = os.path.dirname(_target)
    for _what, _attempt in (("overwrite", lambda: open(os.path.join(_folder, "other.json"), "w").write("{}")),
                            ("fifo", lambda: os.mkfifo(_target))):
        try:
            _attempt()
            os.write(2, f"probe: {_what} done\n".encode())
        except OSError as e:
            os.write(2, f"probe: {_what} refused ({e.strerror})\n".encode())


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
