"""Chunkings: ways to cut n output ids into deltas, as lists of delta sizes.

Every list sums to n and holds no zero. `basic` always starts with the single chunk
and one id per delta; `exhaustive` adds every 2-split, a seeded sample of 3-splits and
seeded random partitions. Same seed, same chunkings.
"""

from __future__ import annotations

import random

__all__ = ["basic", "exhaustive", "random_partition"]


def random_partition(n: int, rng: random.Random) -> list[int]:
    """A random partition of n ids; delta sizes skew small, as engines emit them."""
    sizes: list[int] = []
    left = n
    while left > 0:
        size = min(left, rng.choice((1, 1, 2, 3, 4, 8, rng.randint(1, max(1, n // 2)))))
        sizes.append(size)
        left -= size
    return sizes


def basic(n: int, rng: random.Random, partitions: int = 2) -> list[list[int]]:
    """Single chunk, one id per delta, 8 ids per delta, and a few random partitions."""
    if n == 0:
        return [[]]
    out = [[n], [1] * n, [8] * (n // 8) + ([n % 8] if n % 8 else [])]
    out += [random_partition(n, rng) for _ in range(partitions)]
    return _unique(out)


def exhaustive(
    n: int, rng: random.Random, threes: int = 30, partitions: int = 20
) -> list[list[int]]:
    """`basic`, every 2-split, `threes` sampled 3-splits and random partitions."""
    out = basic(n, rng, partitions)
    out += [[i, n - i] for i in range(1, n)]
    if n >= 3:
        for _ in range(threes):
            a, b = sorted(rng.sample(range(1, n), 2))
            out.append([a, b - a, n - b])
    return _unique(out)


def _unique(chunkings: list[list[int]]) -> list[list[int]]:
    seen: set[tuple[int, ...]] = set()
    out = []
    for sizes in chunkings:
        key = tuple(sizes)
        if key not in seen:
            seen.add(key)
            out.append(sizes)
    return out
