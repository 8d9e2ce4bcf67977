"""How well a vocab fits a text: `[UNK]` rate and word-pieces per word; a random-subset baseline.

`FullTokenizer` splits a text into words with the BasicTokenizer and word-pieces each word on
its own, so a text's figures are those of its distinct words (`words.WordCounter`) weighted by
their counts: exact, and fast (the Austen novels have 14k distinct words in 0.9M).
"""
import dataclasses
import random
import re

from vocab import tokenization
from bert_tasks.pretraining.vocab_building import learner

# The reserved names of the original's vocabs: [PAD], [UNK], [CLS], [SEP], [MASK], [unusedN].
_RESERVED_NAME = re.compile(r"\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]")


@dataclasses.dataclass(frozen=True)
class Figures(object):
    """Totals of a vocab on a text.

    Attributes:
      words: words (BasicTokenizer output) of the text.
      pieces: word-pieces `FullTokenizer.tokenize` gives (a `[UNK]` counts as one).
      unknown: words that became `[UNK]`.
    """
    words: int
    pieces: int
    unknown: int

    @property
    def unk_rate(self):
        """Fraction of words that are `[UNK]`."""
        return self.unknown / self.words

    @property
    def pieces_per_word(self):
        return self.pieces / self.words


def figures(vocab, word_counts, unk_token="[UNK]"):
    """Figures of `vocab` on the text whose words are counted in `word_counts`.

    Args:
      vocab: token -> id (`tokenization.load_vocab`) or any container of tokens.
      word_counts: mapping word -> count (`words.WordCounter.count` of the text).
    """
    wordpiece = tokenization.WordpieceTokenizer(vocab, unk_token=unk_token)
    num_words = num_pieces = num_unknown = 0
    for word, count in word_counts.items():
        pieces = wordpiece.tokenize(word)
        num_words += count
        num_pieces += count * len(pieces)
        num_unknown += count * (pieces == [unk_token])
    return Figures(num_words, num_pieces, num_unknown)


def random_subset(source, reserved, characters, size, seed):
    """A vocab of `size` tokens from `source`, fair to compare with a learned one.

    It keeps `reserved` (the learned vocab's reserved block, in order), the single-character
    tokens of `source` (alone or after `##`) that are also in `characters` (the learned vocab's
    ones, so both spell the same characters), and fills the rest with a uniform random sample,
    seeded, of the multi-character tokens of `source` (reserved names such as `[unused5]`
    excluded). With `characters=None` no character is kept on purpose: the sample is drawn from
    all tokens but the reserved names, characters included.

    Args:
      source: list of str, e.g. bert-base-uncased's vocab lines.
      reserved: list of str.
      characters: set of single-character tokens, or None.
      size: int, number of tokens wanted.
      seed: int, seed of the sample.
    Returns:
      list of str, `size` tokens: reserved, characters, then the sample in `source` order.
    Raises:
      ValueError: `size` is smaller than the reserved and character tokens, or larger than
        `source` allows.
    """
    kept = set(reserved)
    chars = [t for t in source if characters is not None and t in characters
             and learner.is_character_token(t) and t not in kept]
    others = [t for t in source if t not in kept and not _RESERVED_NAME.fullmatch(t)
              and (characters is None or not learner.is_character_token(t))]
    wanted = size - len(reserved) - len(chars)
    if not 0 <= wanted <= len(others):
        raise ValueError("cannot make %d tokens from %d reserved, %d characters and %d others"
                         % (size, len(reserved), len(chars), len(others)))
    position = {t: i for i, t in enumerate(others)}
    sample = sorted(random.Random(seed).sample(others, wanted), key=position.get)
    return list(reserved) + chars + sample
