"""Words of a text, split exactly as the original BasicTokenizer splits them, and counted.

The original `BasicTokenizer.tokenize(text)` cleans the text (drops control and format
characters, maps whitespace to spaces), puts spaces around CJK ideographs, splits on whitespace,
and then works on each whitespace token alone: lower case and strip accents (uncased), split off
punctuation. So the words of a text are the words of its whitespace tokens, and a corpus repeats
its tokens a lot: `WordCounter` counts the whitespace tokens (C speed), runs the original
`BasicTokenizer` once per distinct token, and multiplies. The counts equal those of
`BasicTokenizer.tokenize` run over every line (`tests/test_build_vocab.py` compares them on the
tokenization fixtures); the work grows with the distinct tokens, not the corpus.

No TensorFlow here: `count_words` runs in spawned worker processes.
"""
import collections
import functools
import re

from vocab import tokenization

# Text that cleaning and CJK spacing leave as it is: printable ASCII, tab, newline, CR.
_SIMPLE_TEXT = re.compile("[\\t\\n\\r\\x20-\\x7e]*")
# Distinct whitespace tokens whose words are remembered; past this the memo starts again, so a
# worker's memory stays bounded on any corpus.
_MEMO_LIMIT = 1 << 20
# For its `_is_chinese_char` (which needs no state).
_BASIC = tokenization.BasicTokenizer()


class _CleaningTable(dict):
    """`str.translate` table: code point -> what `_clean_text`, then `_tokenize_chinese_chars`,
    make of that character (both map each character on its own).

    Filled lazily from the original's own predicates, so it agrees with them for any character
    and costs nothing for characters a corpus does not have.
    """

    def __missing__(self, cp):
        char = chr(cp)
        if cp == 0 or cp == 0xFFFD or tokenization._is_control(char):
            value = None
        elif tokenization._is_whitespace(char):
            value = " "
        elif _BASIC._is_chinese_char(cp):
            value = " %s " % char
        else:
            value = char
        self[cp] = value
        return value


def whitespace_tokens(text, table=None):
    """The whitespace tokens the original BasicTokenizer works on, in order (list of str).

    Args:
      text: str, any number of lines (a newline is whitespace, so lines never join).
      table: a `_CleaningTable` to reuse (one is made otherwise).
    """
    if not _SIMPLE_TEXT.fullmatch(text):
        text = text.translate(_CleaningTable() if table is None else table)
    # str.split also splits at U+2028/U+2029 and U+001C..U+001F, as the original's
    # `whitespace_tokenize` does (the last four are control characters, deleted before).
    return text.split()


class WordCounter(object):
    """str text -> Counter of its words (`BasicTokenizer.tokenize` of each line, counted).

    Args:
      do_lower_case: the original flag (lower case and strip accents).
    """

    def __init__(self, do_lower_case):
        self._basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
        self._table = _CleaningTable()
        self._memo = {}  # whitespace token -> tuple of its words

    def count(self, text):
        """Counter word -> occurrences in `text` (str)."""
        tokens = collections.Counter(whitespace_tokens(text, self._table))
        if len(self._memo) > _MEMO_LIMIT:
            self._memo.clear()
        memo, words = self._memo, collections.Counter()
        for token, count in tokens.items():
            split = memo.get(token)
            if split is None:
                split = memo[token] = self._token_words(token)
            for word in split:
                words[word] += count
        return words


    def _token_words(self, token):
        """The words of one whitespace token: the body of the original `BasicTokenizer.tokenize`
        loop over tokens, with its own methods (its steps before the loop leave a token as is)."""
        basic = self._basic
        if basic.do_lower_case:
            token = basic._run_strip_accents(token.lower())
        return tuple(tokenization.whitespace_tokenize(" ".join(basic._run_split_on_punc(token))))


@functools.lru_cache(maxsize=2)
def _counter(do_lower_case):
    return WordCounter(do_lower_case)


def count_words(text, do_lower_case):
    """`WordCounter(do_lower_case).count(text)` with one counter (and memo) per process."""
    return _counter(do_lower_case).count(text)
