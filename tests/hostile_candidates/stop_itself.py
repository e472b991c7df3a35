"""Stops its own process (SIGSTOP) inside `solution`: nothing ever resumes it."""
import os
import signal


def solution(x):
    os.kill(os.getpid(), signal.SIGSTOP)
    return x.clone()
