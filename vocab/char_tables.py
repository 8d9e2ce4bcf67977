"""The original BasicTokenizer's character rules as RE2 classes and a code-point map.

Everything is derived from *this interpreter's* `unicodedata` through the faithful predicates in
`vocab.tokenization`, never from the Unicode tables compiled into RE2 or ICU. The fast path and the
faithful path therefore agree even where those libraries ship a different Unicode version.

Built once per process (under a second) and cached.
"""
import dataclasses
import functools
import unicodedata

import numpy as np

from vocab import tokenization

_NUM_CODEPOINTS = 0x110000
_SURROGATES = range(0xD800, 0xE000)  # Cannot occur in UTF-8 text, nor in an RE2 class.
_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"


@dataclasses.dataclass(frozen=True)
class CharTables:
    """RE2 patterns and the lower-case/strip-accents map, all as plain Python/numpy values.

    Attributes:
      delete_class: characters `_clean_text` drops (U+0000, U+FFFD, Cc/Cf except tab/newline/CR).
      space_class: non-ASCII characters that act as whitespace once cleaned (Zs, U+2028/9); the
        ASCII ones (space, tab, newline, CR) are already what tf.strings.split splits on.
      cjk_class: the 8 CJK ideograph ranges that get spaces around them.
      punct_class: `_is_punctuation` characters (ASCII non-alphanumerics and Unicode P*).
      final_sigma_pattern / final_sigma_rewrite: turn a capital sigma that `str.lower()` would
        make final (ς) into ς; every other Σ is left to the map (σ).
      reorder_class: non-Mn characters with a nonzero combining class. NFD reorders a run of these,
        which a per-character map cannot; a line with two of them is a fallback case.
      map_keys: int32 [K], sorted code points c where strip_accents(c.lower()) != c.
      map_starts / map_lengths: int32 [K], where each key's replacement lies in `map_values`.
      map_values: int32 [V], the replacement code points, concatenated.
    """
    delete_class: str
    space_class: str
    cjk_class: str
    punct_class: str
    final_sigma_pattern: str
    final_sigma_rewrite: str
    reorder_class: str
    map_keys: np.ndarray
    map_starts: np.ndarray
    map_lengths: np.ndarray
    map_values: np.ndarray


def regex_class(codepoints):
    """An RE2 character class (`[\\x{41}-\\x{5a}...]`) matching exactly `codepoints` (sorted ints)."""
    parts = []
    start = prev = None
    for cp in list(codepoints) + [None]:
        if cp is not None and prev is not None and cp == prev + 1:
            prev = cp
            continue
        if start is not None:
            parts.append("\\x{%x}" % start if start == prev else "\\x{%x}-\\x{%x}" % (start, prev))
        start = prev = cp
    return "[" + "".join(parts) + "]"


# Unassigned, private-use and CJK unified ideographs: never cased, case-ignorable, punctuation,
# whitespace, lowered or decomposed. (The compatibility ideographs F900-FAFF and 2F800-2FA1F are
# not listed: NFD maps them to unified ones.)
_INERT_CATEGORIES = ("Cn", "Co")
_INERT_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0x20000, 0x2A6DF), (0x2A700, 0x2CEAF),
                 (0x30000, 0x3134F))


@functools.lru_cache(maxsize=None)
def _candidates():
    """Code points whose case or decomposition may matter, as a list of (cp, char, category).

    The loop runs over the ranges between the inert ranges and the surrogates rather than
    testing each of the 1.1 million code points for membership in them: it runs in every
    process that builds a tokenizer (export_model.py, predict.py, dynamic masking)."""
    category_of = unicodedata.category
    skipped = sorted([*_INERT_RANGES, (_SURROGATES.start, _SURROGATES.stop - 1),
                      (_NUM_CODEPOINTS, _NUM_CODEPOINTS)])
    out, start = [], 0
    for lo, hi in skipped:
        for cp in range(start, lo):
            char = chr(cp)
            category = category_of(char)
            if category not in _INERT_CATEGORIES:
                out.append((cp, char, category))
        start = hi + 1
    return out


_BASIC = tokenization.BasicTokenizer(do_lower_case=True)


def _strip_lower(char, category):
    """strip_accents(char.lower()), with a quick exit for characters both steps leave alone."""
    lower = char.lower()
    if lower == char and category != "Mn" and unicodedata.is_normalized("NFD", char):
        return char
    return _BASIC._run_strip_accents(lower)


def _final_sigma_regex():
    """RE2 pattern and rewrite reproducing CPython's Final_Sigma rule for `str.lower()`.

    CPython lowers Σ to ς when the nearest non-case-ignorable character before it is cased and the
    nearest one after it is not (or there is none). Its Cased and Case_Ignorable tables are not
    exposed, so they are read off `str.lower()` itself:
      * `(x + "Σ").lower()` ends in ς  <=> x is cased and not case-ignorable (set C);
      * `("AΣ" + x + "A").lower()[1]` is σ <=> x is case-ignorable or in C (set S, "skip or cased").
    """
    cased, skip_or_cased = [], []
    for cp, char, _ in _candidates():
        if (char + _SIGMA).lower()[-1] == _FINAL_SIGMA:
            cased.append(cp)
        if ("A" + _SIGMA + char + "A").lower()[1] != _FINAL_SIGMA:
            skip_or_cased.append(cp)
    cased_set = set(cased)
    ignorable = regex_class([cp for cp in skip_or_cased if cp not in cased_set])
    # (cased ignorable*) Σ (ignorable* (not cased-or-ignorable | end))
    pattern = "(%s%s*)\\x{3a3}(%s*(?:[^%s]|$))" % (
        regex_class(cased), ignorable, ignorable, regex_class(skip_or_cased)[1:-1])
    return pattern, "\\1" + _FINAL_SIGMA + "\\2"


@functools.lru_cache(maxsize=None)
def tables():
    """The CharTables for this interpreter (cached)."""
    delete, space, punct, reorder = [], [], [], []
    keys, starts, lengths, values = [], [], [], []
    for cp, char, category in _candidates():
        if cp == 0 or cp == 0xFFFD or tokenization._is_control(char):
            delete.append(cp)
            continue  # Deleted before anything else looks at it.
        if (tokenization._is_whitespace(char) or char.isspace()) and cp > 0x7F:
            space.append(cp)
        if tokenization._is_punctuation(char):
            punct.append(cp)
        if unicodedata.combining(char) and category != "Mn":
            reorder.append(cp)
        mapped = _strip_lower(char, category)
        if mapped != char:
            keys.append(cp)
            starts.append(len(values))
            lengths.append(len(mapped))
            values.extend(ord(c) for c in mapped)
    cjk = [cp for lo, hi in tokenization.CJK_RANGES for cp in range(lo, hi + 1)]
    sigma_pattern, sigma_rewrite = _final_sigma_regex()
    return CharTables(
        delete_class=regex_class(delete),
        space_class=regex_class(space),
        cjk_class=regex_class(sorted(cjk)),
        punct_class=regex_class(punct),
        final_sigma_pattern=sigma_pattern,
        final_sigma_rewrite=sigma_rewrite,
        reorder_class=regex_class(reorder),
        map_keys=np.array(keys, np.int32),
        map_starts=np.array(starts, np.int32),
        map_lengths=np.array(lengths, np.int32),
        map_values=np.array(values, np.int32),
    )
