"""`backends.llama.reusable`: how much of llama.cpp's cache a request keeps, so that its
logits are those of its prompt evaluated afresh (whole decode batches of the previous
prompt's prefill, never its generated ids, never the prompt's last id)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolwire.backends.llama import reusable

BATCH = 4


def test_a_repeated_prompt_keeps_its_whole_batches_and_decodes_the_tail_again() -> None:
    prompt = list(range(10))
    cached = [*prompt, 99, 98]  # the prompt, then two generated ids
    assert reusable(cached, 10, prompt, BATCH) == 8


def test_generated_ids_are_never_kept() -> None:
    # the next turn's prompt holds the previous answer: those ids were decoded one by one
    previous = list(range(5))
    cached = [*previous, 7, 8, 9, 10, 11]
    prompt = [*cached, 12, 13]
    assert reusable(cached, len(previous), prompt, BATCH) == 4


def test_a_prompt_shorter_than_a_batch_is_evaluated_afresh() -> None:
    assert reusable([1, 2, 3], 3, [1, 2, 3], BATCH) == 0
    assert reusable([], 0, [1, 2, 3, 4, 5, 6], BATCH) == 0


def test_a_different_prompt_keeps_only_the_shared_whole_batches() -> None:
    cached = list(range(20))
    prompt = [*range(9), 42, 43]
    assert reusable(cached, 20, prompt, BATCH) == 8


@given(
    cached=st.lists(st.integers(0, 3), max_size=40),
    prompt=st.lists(st.integers(0, 3), min_size=1, max_size=40),
    prefilled=st.integers(0, 40),
    batch=st.integers(1, 9),
)
def test_what_is_kept_is_a_shared_prefix_of_whole_batches_of_the_prefill(
    cached: list[int], prompt: list[int], prefilled: int, batch: int
) -> None:
    keep = reusable(cached, prefilled, prompt, batch)
    assert keep % batch == 0
    assert 0 <= keep <= min(prefilled, len(prompt) - 1)
    assert cached[:keep] == prompt[:keep]
