"""The corpus's word counts, in a table of bounded size.

A corpus larger than memory has more distinct words than fit, most of them seen once or twice
(typos, numbers, names). `WordTable` keeps at most `capacity` words: when a merge takes it past
that, every word at or below a count cut-off is dropped, the cut-off chosen as the lowest that
leaves at most `capacity // 2` words. A dropped word that comes back starts again from zero, so
counts are lower bounds by at most the largest cut-off used (`max_dropped_count`); the words
above it, which are the ones the learner uses, are counted exactly.
"""
import collections

import numpy as np


class WordTable(object):
    """word -> count, at most `capacity` entries (see the module docstring).

    Args:
      capacity: int >= 2.
    """

    def __init__(self, capacity):
        if capacity < 2:
            raise ValueError("capacity must be >= 2, got %d" % capacity)
        self.capacity = capacity
        self.counts = collections.Counter()
        self.max_dropped_count = 0  # 0: nothing was ever dropped, every count is exact
        self.num_pruned = 0  # how many times words were dropped

    def __len__(self):
        return len(self.counts)

    def add(self, counts):
        """Adds a mapping word -> count (e.g. one block's `WordCounter.count`)."""
        self.counts.update(counts)
        if len(self.counts) > self.capacity:
            self._prune()

    def _prune(self):
        values = np.fromiter(self.counts.values(), np.int64, len(self.counts))
        num_drop = len(values) - self.capacity // 2
        # The smallest cut-off that drops at least num_drop words; ties are all dropped, so the
        # result depends on the counts only, not on the order words arrived in.
        cutoff = int(np.partition(values, num_drop - 1)[num_drop - 1])
        self.counts = collections.Counter(
            {word: count for word, count in self.counts.items() if count > cutoff})
        self.max_dropped_count = max(self.max_dropped_count, cutoff)
        self.num_pruned += 1
