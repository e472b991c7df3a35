"""A zygote's children may run at once (pkbsim/screen/isolation.py): a screen runs its sizes stage's process
beside its functional stage's. Each child's end is reported as it happens and kept until the parent waits for
that child; a child past its time limit is killed alone. The children here stand in for a candidate's process
(the module's `_child`, patched before the zygote forks): no confinement, no screen."""
from __future__ import annotations

import os
import time

import torch

from pkbsim.screen import isolation
from pkbsim.screen.isolation import RESULT, Zygote


def _stand_in(job: dict, workdir: str) -> None:
    """Wait up to job["wait_s"] for job["flag"] to exist, then hand back whether it did."""
    code = 0
    try:
        end = time.monotonic() + job["wait_s"]
        while job["flag"] and not os.path.exists(job["flag"]) and time.monotonic() < end:
            time.sleep(0.02)
        seen = bool(job["flag"]) and os.path.exists(job["flag"])
        torch.save({"name": job["name"], "flag_seen": seen}, os.path.join(workdir, RESULT))
    except BaseException:  # noqa: BLE001
        code = 70
    finally:
        os._exit(code)


def test_children_run_at_once_and_each_is_waited_for_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "_child", _stand_in)
    flag = str(tmp_path / "go")
    zygote = Zygote()
    try:
        slow = zygote.start({"name": "slow", "flag": flag, "wait_s": 20.0})
        fast = zygote.start({"name": "fast", "flag": "", "wait_s": 0.0})   # forked while the slow one runs
        got, ended = fast.result(10.0)
        assert got == {"name": "fast", "flag_seen": False} and ended.code == 0
        open(flag, "w").close()   # only now may the slow one finish: it saw the flag, so it ran all along
        got, ended = slow.result(30.0)
        assert got == {"name": "slow", "flag_seen": True} and ended.code == 0
        # a child past its limit is killed and reported so, while another one's end is kept for its own wait
        stuck = zygote.start({"name": "stuck", "flag": str(tmp_path / "never"), "wait_s": 60.0})
        done = zygote.start({"name": "done", "flag": "", "wait_s": 0.0})
        time.sleep(0.5)
        got, ended = stuck.result(0.5)
        assert got is None and ended.timed_out
        got, ended = done.result(10.0)
        assert got == {"name": "done", "flag_seen": False} and ended.code == 0
    finally:
        zygote.close()


def test_closing_the_zygote_ends_children_still_running(tmp_path, monkeypatch):
    """The parent closes its requests (a screen that rejected before it needed the sizes stage's process): the
    zygote kills what still runs and leaves, instead of waiting for it."""
    monkeypatch.setattr(isolation, "_child", _stand_in)
    zygote = Zygote()
    zygote.start({"name": "left", "flag": str(tmp_path / "never"), "wait_s": 60.0})
    t0 = time.monotonic()
    zygote.close()
    assert time.monotonic() - t0 < 30.0
