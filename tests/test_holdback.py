"""`Holdback`: the one answer to "how much of this text's end could begin a pattern"
(the parser's delimiters, the syntaxes' closing tags and quotes, stop strings)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolwire.holdback import Holdback

# A small alphabet, a sentinel (a lone surrogate, as delimiter ids become) included, so
# that tails and patterns overlap often.
CHARS = st.sampled_from("<|/>a\n\ud800")


def longest_tail(text: str, start: int, patterns: list[str]) -> int:
    """The definition, by brute force."""
    return max(
        (
            k
            for k in range(1, len(text) - start + 1)
            for p in patterns
            if k < len(p) and p.startswith(text[len(text) - k :])
        ),
        default=0,
    )


@given(
    st.lists(st.text(CHARS, max_size=6), max_size=4),
    st.text(CHARS, max_size=12),
    st.integers(0, 12),
)
def test_tail_is_the_longest_proper_prefix_of_a_pattern(
    patterns: list[str], text: str, start: int
) -> None:
    start = min(start, len(text))
    assert Holdback(patterns).tail(text, start) == longest_tail(text, start, patterns)


def test_examples() -> None:
    close = Holdback(["</parameter>"])
    assert close.tail("Paris\n</para") == len("</para")
    assert close.tail("Paris") == 0
    assert close.tail("</parameter>") == 0  # a whole pattern is the matcher's to find
    assert close.tail("a<", start=2) == 0  # only text[start:] is held
    assert Holdback([]).tail("abc") == 0
    assert Holdback(["", "ab"]).tail("xa") == 1
