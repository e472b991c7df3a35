"""Exploit class, in the statistics: identical code called "faster" because the rule let a wide interval
through (an exact copy of the reference on a loaded gloo machine: 3.45x, interval 1.06-5.45, margin 2.39).
"faster" now needs the whole 95% interval of the speed-up above 1 + the noise margin. The twin: a clear
speed-up, whose whole interval clears the margin, is still faster."""
from hwbackend.timing import clears_noise, summarize

# times (s) of two launches each: the reference's spread wide (a loaded machine), the candidate's less so
WIDE_REF = [[9.02, 4.70, 0.94, 5.09, 4.60, 4.80, 4.52, 9.67], [0.90, 1.07, 9.51, 0.99, 1.03, 5.43, 1.08, 8.97]]
WIDE_CAND = [[0.30, 0.31, 0.31, 0.32, 0.68, 0.65, 0.62, 0.36], [0.93, 0.32, 0.91, 0.36, 0.62, 0.92, 0.34, 0.65]]


def test_the_reported_case_is_not_faster_and_a_clear_one_is():
    assert not clears_noise([1.06, 5.45], 2.39)  # the reported score: the median (3.45x) cleared 1 + margin
    assert clears_noise([3.5, 5.45], 2.39)
    assert not clears_noise([1.5, 1.6], 0.5) and clears_noise([1.6, 1.7], 0.5)


def test_a_wide_interval_whose_median_clears_the_margin_is_not_faster():
    s = summarize(WIDE_REF, WIDE_CAND)
    lo, hi = s.ci95
    # what the old rule (lower bound above 1, median above 1 + margin) called faster
    assert lo > 1.0 and s.speedup > 1.0 + s.noise_margin
    assert lo < 1.0 + s.noise_margin and not s.faster


def test_the_twin_whose_whole_interval_clears_the_margin_is_faster():
    ref = [[1.00, 1.02, 0.99, 1.01, 1.00, 0.98], [1.01, 1.00, 0.99, 1.02, 1.00, 1.01]]
    cand = [[0.50, 0.51, 0.49, 0.50, 0.52, 0.50], [0.50, 0.49, 0.51, 0.50, 0.50, 0.51]]
    s = summarize(ref, cand)
    assert s.ci95[0] > 1.0 + s.noise_margin and s.faster
