"""Attack: the call zeroes its input in place; on import, the file rewrites pkb's input digest in its own
process (to a constant) so that the change it makes is not seen. The answer is right; the caller's tensor
is not what it passed."""
import sys

import torch.distributed as dist

for _name, _mod in list(sys.modules.items()):
    if _name.startswith("pkbsim") and hasattr(_mod, "input_digest"):
        _mod.input_digest = lambda args: "unchanged"


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    x.mul_(0)
    return out
