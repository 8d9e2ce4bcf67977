"""Labelling text with a list of names (a gazetteer): CoNLL-style words and IOB2 tags.

For data without annotations, such as the demo's novels: every occurrence of a listed name is an
entity of its type. Names may span several words ("Box Hill"); the longest listed name wins, and
consecutive names of one type form one entity ("Elizabeth Bennet" from "Elizabeth" and "Bennet"),
as a person's first name and surname do. Matching is case-sensitive, so "Frank" the name is
not "frank" the adjective.

    gazetteer = Gazetteer({"PER": ["Elizabeth", "Bennet"], "LOC": ["Box Hill", "Bath"]})
    words = tokenize("Elizabeth Bennet walked to Box Hill.")
    gazetteer.tag(words)   # ['B-PER', 'I-PER', 'O', 'O', 'B-LOC', 'I-LOC', 'O']
"""
import re

# Titles with their full stop, words, a possessive "'s" on its own, other characters one by one:
# CoNLL-2003's tokens.
_WORDS = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St)\.|'s\b|\w+|[^\w\s]")


def tokenize(text):
    """CoNLL-style words of `text`: "Mr. Darcy's." -> ["Mr.", "Darcy", "'s", "."]."""
    return _WORDS.findall(text)


class Gazetteer:
    """Names by entity type.

    Args:
      names_by_type: {type: iterable of names (str, words separated by spaces)}. A name listed
        under two types is an error.
    """

    def __init__(self, names_by_type):
        self._types = {}
        for entity_type, names in names_by_type.items():
            for name in names:
                key = tuple(tokenize(name))
                if self._types.setdefault(key, entity_type) != entity_type:
                    raise ValueError("%r is listed as %s and as %s"
                                     % (name, self._types[key], entity_type))
        self._max_words = max(len(key) for key in self._types)

    def _match(self, words, start):
        """(length, type) of the longest name at words[start:], or (0, None)."""
        for length in range(min(self._max_words, len(words) - start), 0, -1):
            entity_type = self._types.get(tuple(words[start:start + length]))
            if entity_type:
                return length, entity_type
        return 0, None

    def tag(self, words):
        """IOB2 tags of `words`."""
        tags = []
        prev_type = None
        i = 0
        while i < len(words):
            length, entity_type = self._match(words, i)
            if not length:
                tags.append("O")
                prev_type = None
                i += 1
                continue
            first = "I" if entity_type == prev_type else "B"
            tags += [first + "-" + entity_type] + ["I-" + entity_type] * (length - 1)
            prev_type = entity_type
            i += length
        return tags
