"""WordPiece learning with tensorflow-text's learner, to an exact number of tokens.

tensorflow-text's learner (`tensorflow_text.tools.wordpiece_vocab`, module
`wordpiece_tokenizer_learner_lib`, what `bert_vocab_from_dataset` calls) learns a vocab for a
count threshold t with `learn_with_thresh`: it counts every substring of every word (first
round) or the pieces the current vocab splits words into (three more rounds), and keeps the
pieces seen at least t times, plus every character alone and with `##`. Its `learn` finds the t
that gives the requested size by bisection of [lower_thresh, largest word count], one
`learn_with_thresh` call per step: about log2(largest count / t) calls, 12-13 for the Austen
novels at 2,000-4,000 tokens.

`learn_vocab` uses the same input filtering (`get_input_words`, `get_allowed_chars`,
`filter_input_words`) and the same `learn_with_thresh`, so the vocab at a given threshold is the
library's; only the search differs. The size falls with t about as a power law, so the search
interpolates in log-log space between the thresholds tried, starting at the count of the
`size`-th most frequent word: 2 calls for the novels at 1,000-5,000 tokens
(`bench/vocab_quality.py --peer` times both). It accepts a vocab of `size` to
`size * (1 + SLACK)` tokens and then drops the learned pieces with the lowest counts (the
learner lists them by count) down to exactly `size`, never a character or a `##` character:
every word the learner saw can still be spelled.
"""
import dataclasses
import math
import time

from absl import logging

JOINER = "##"
# tensorflow-text's defaults for the learner's other parameters.
NUM_ITERATIONS = 4
MAX_TOKEN_LENGTH = 50
SLACK = 0.05
# Slope of log(size) over log(threshold) assumed until two thresholds have been tried (measured
# -0.5 to -0.6 on the Austen novels).
_INITIAL_SLOPE = -0.6


def _tf_text_learner():
    # Deferred: importing tensorflow_text imports TensorFlow, which word-counting workers
    # (they import the main script) should not pay for.
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib
    return wordpiece_tokenizer_learner_lib


class LearnerError(ValueError):
    """The words cannot give the requested vocab (none at all, or too many characters)."""


class TooManyCharacters(LearnerError):
    """The size asked cannot hold every character alone and after `##`.

    Attributes:
      needed: tokens the characters need.
      num_chars: distinct characters.
    """

    def __init__(self, size, needed, num_chars):
        super().__init__("%d tokens cannot hold the %d characters of the words (each alone and "
                         "after ##: %d tokens)" % (size, num_chars, needed))
        self.needed, self.num_chars = needed, num_chars


@dataclasses.dataclass
class LearnResult(object):
    """What `learn_vocab` returns.

    Attributes:
      tokens: the learned tokens, in the learner's order (characters, then by count).
      threshold: the count threshold of the vocab they were cut from.
      calls: number of `learn_with_thresh` calls.
      num_words: distinct words the learner used (after its filters).
      num_chars: distinct characters among them (each is a token, and so is `##` + it).
      short_by: how many tokens fewer than asked (the corpus has too few pieces at `min_count`).
    """
    tokens: list
    threshold: int
    calls: int
    num_words: int
    num_chars: int
    short_by: int = 0


def is_character_token(token):
    """Whether `token` is one character, alone or after `##` (every word needs them)."""
    return len(token) == 1 or (token.startswith(JOINER) and len(token) == len(JOINER) + 1)


def learn_vocab(word_counts, size, exclude=frozenset(), min_count=10,
                max_input_words=5_000_000, max_unique_chars=1000):
    """Learns `size` WordPiece tokens from word counts.

    Args:
      word_counts: iterable of (word, count) (e.g. `WordTable.counts.items()`).
      size: int, number of tokens wanted.
      exclude: tokens not to learn (the reserved ones); words equal to them are not learned from.
      min_count: the learner's `lower_thresh`: no piece seen fewer times is learned.
      max_input_words: the learner's `max_input_tokens`: only this many most frequent words.
      max_unique_chars: the learner's `max_unique_chars`: words with rarer characters are left
        out (the characters then get no token).
    Returns:
      LearnResult with exactly `size` tokens, or fewer (`short_by`) when even the threshold
      `min_count` gives fewer.
    Raises:
      LearnerError: no word is left after the filters.
      TooManyCharacters: `size` is smaller than the character tokens the words need.
    """
    tf_text_learner = _tf_text_learner()
    exclude = frozenset(exclude)
    words = tf_text_learner.get_input_words(word_counts, exclude, MAX_TOKEN_LENGTH)
    allowed = tf_text_learner.get_allowed_chars(words, max_unique_chars)
    words = tf_text_learner.filter_input_words(words, allowed, max_input_words)
    if not words:
        raise LearnerError("no word to learn from (every word is longer than %d characters or "
                           "reserved)" % MAX_TOKEN_LENGTH)
    chars = tf_text_learner.extract_char_tokens(words)
    needed = sum(1 for c in chars for t in (c, JOINER + c) if t not in exclude)
    if size < needed:
        raise TooManyCharacters(size, needed, len(chars))
    upper, lower = tf_text_learner.get_search_threshs(words, None, min_count)
    upper = max(upper, lower)  # every word rarer than min_count: pieces may still reach it
    params = tf_text_learner.Params(
        upper_thresh=upper, lower_thresh=lower, num_iterations=NUM_ITERATIONS,
        max_input_tokens=max_input_words, max_token_length=MAX_TOKEN_LENGTH,
        max_unique_chars=max_unique_chars, vocab_size=size, slack_ratio=SLACK,
        include_joiner_token=True, joiner=JOINER, reserved_tokens=[])
    search = _ThresholdSearch(words, params, exclude, size, lower, upper)
    threshold, tokens = search.run()
    result = LearnResult(_cut(tokens, size), threshold, search.calls, len(words), len(chars))
    result.short_by = size - len(result.tokens)
    return result


class _ThresholdSearch(object):
    """Finds a threshold whose vocab has `size` to `size * (1 + SLACK)` tokens (see module doc).

    The size is not exactly monotonic in the threshold (the later rounds re-split words), so
    the search keeps a bracket [big, small): `big` the largest threshold tried whose vocab is
    large enough, `small` the smallest one whose vocab is too small.
    """

    def __init__(self, words, params, exclude, size, lower, upper):
        self.words, self.params, self.exclude = words, params, exclude
        self.size, self.lower, self.upper = size, lower, upper
        self.max_size = int(size * (1 + SLACK))
        self.tried = {}  # threshold -> tokens
        self.calls = 0

    def run(self):
        """(threshold, tokens) of the vocab to cut; tokens are fewer than `size` only when
        the lowest threshold gives fewer."""
        counts = sorted((count for _, count in self.words), reverse=True)
        threshold = counts[min(self.size, len(counts)) - 1]
        while True:
            threshold = min(max(threshold, self.lower), self.upper)
            tokens = self._learn(threshold)
            if self.size <= len(tokens) <= self.max_size:
                return threshold, tokens
            big, small = self._bracket()
            low = self.lower if big is None else big + 1
            high = self.upper if small is None else small - 1
            if low > high:  # no threshold left between a large enough vocab and a too small one
                best = self.lower if big is None else big
                return best, self.tried[best]
            threshold = self._next(big, small, low, high)

    def _learn(self, threshold):
        start = time.monotonic()
        learned = _tf_text_learner().learn_with_thresh(self.words, threshold, self.params)
        tokens = [t for t in learned if t not in self.exclude]
        self.calls += 1
        self.tried[threshold] = tokens
        logging.info("learner: count threshold %d -> %d tokens (want %d-%d), %.1fs (call %d)",
                     threshold, len(tokens), self.size, self.max_size,
                     time.monotonic() - start, self.calls)
        return tokens

    def _bracket(self):
        big = [t for t, tokens in self.tried.items() if len(tokens) >= self.size]
        small = [t for t, tokens in self.tried.items() if len(tokens) < self.size]
        return (max(big) if big else None), (min(small) if small else None)

    def _next(self, big, small, low, high):
        """The next threshold in [low, high] (no threshold there was tried): interpolated in
        log-log space, or the geometric middle when the sizes tried are out of order."""
        target = math.log(self.size * (1 + SLACK / 2))
        known = [t for t in (big, small) if t is not None]
        if len(known) == 2:
            (t1, t2), (n1, n2) = known, (len(self.tried[t]) for t in known)
            slope = (math.log(n2) - math.log(n1)) / (math.log(t2) - math.log(t1))
        else:
            t1, n1 = known[0], len(self.tried[known[0]])
            slope = _INITIAL_SLOPE
        if slope >= 0:  # sizes out of order (see the class docstring): no trend to follow
            return round(math.sqrt(low * high))
        guess = round(math.exp(math.log(t1) + (target - math.log(n1)) / slope))
        return min(max(guess, low), high)


def _cut(tokens, size):
    """The first `size` tokens of `tokens`, counting only multi-character ones, characters kept."""
    keep = size - sum(map(is_character_token, tokens))
    out = []
    for token in tokens:
        if is_character_token(token):
            out.append(token)
        elif keep > 0:
            out.append(token)
            keep -= 1
    return out
