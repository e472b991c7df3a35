"""expect: functional wrong_output - returns an uninitialised buffer, hoping the allocator hands back
memory where the reference's result still lies; the screen NaN-fills the candidate's fresh allocations."""
import torch


def solution(x):
    return torch.empty_like(x)
