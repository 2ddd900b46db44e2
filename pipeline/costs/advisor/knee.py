"""The knee of a scaling curve: the last worker count whose added worker still bought at least
``fraction`` of its share (one worker's throughput alone)."""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_FRACTION = 0.5


def knee(workers: Sequence[int], throughput: Sequence[float], fraction: float = DEFAULT_FRACTION) -> int:
    """``workers`` ascending, starting at 1. The gain of going from w[i-1] to w[i] workers,
    per added worker, is compared with ``fraction`` x throughput(1). Returns the worker
    count before the first step that falls short (the largest count if none does)."""
    if not workers or workers[0] != 1:
        raise ValueError("the curve must start at 1 worker")
    share = throughput[0]
    for i in range(1, len(workers)):
        gain = (throughput[i] - throughput[i - 1]) / (workers[i] - workers[i - 1])
        if gain < fraction * share:
            return workers[i - 1]
    return workers[-1]
