"""Cheat: returns the local contribution without communicating. Must be "incorrect"."""


def solution(x):
    return x.clone()
