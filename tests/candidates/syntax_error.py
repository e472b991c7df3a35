"""Broken: does not compile. Must be "compile_error"."""


def solution(x)
    return x
