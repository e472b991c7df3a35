"""The batch's table: a long reason is cut at a word with an ellipsis (it was cut mid-word, with nothing to
say so); a short one is left whole."""
from pkb.cli._table import REASON_CHARS, cut


def test_a_long_reason_ends_at_a_word_with_an_ellipsis():
    text = "rank 3 waits in all_reduce at cand.py:41 while rank 5 waits in barrier at cand.py:57; " * 3
    short = cut(text)
    assert len(short) <= REASON_CHARS and short.endswith("…")
    assert text.startswith(short[:-1]) and text[len(short) - 1] in " ,;:"


def test_a_short_reason_is_left_whole():
    assert cut("wrong output at rank 1") == "wrong output at rank 1"
