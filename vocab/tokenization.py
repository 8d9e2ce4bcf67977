"""Faithful WordPiece tokenization: google-research/bert `tokenization.py` (commit eedf571).

Same names, signatures and outputs as the original, token for token (`spec/data.md` §1):

* `BasicTokenizer`: drop control/format characters, map whitespace to spaces, isolate CJK ideographs,
  whitespace-split, optionally lower-case + strip accents (NFD, drop `Mn`, never recomposed),
  then split punctuation (ASCII non-alphanumerics and Unicode `P*`).
* `WordpieceTokenizer`: greedy longest-match-first; a word longer than 200 code points, or with
  any position that matches nothing, becomes one `[UNK]`.

Differences from the original, all on bad input only:
* The vocab is read as UTF-8 bytes, dropping `\\r` like TF 2.x `GFile` does. Invalid UTF-8 raises
  `VocabError` naming the file and line (the original died with a bare `UnicodeDecodeError`).
* A missing or empty vocab file, or one without `[UNK]`, `[CLS]` or `[SEP]`, raises `VocabError`
  when `FullTokenizer` is built, instead of a bare `KeyError` later.
* Duplicate entries keep the original's behaviour (the later index wins, the key keeps its first
  position, `inv_vocab` lacks the overwritten id) but emit a `DuplicateVocabWarning` naming the file
  and lines.
* `convert_tokens_to_ids` / `convert_ids_to_tokens` still raise `KeyError` for unknown items, with a
  message that says which item.
"""
import collections
import re
import unicodedata
import warnings

# Tokens every FullTokenizer user (classifier, SQuAD, pretraining) looks up by name.
REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")

# Original max_input_chars_per_word (Hugging Face uses 100).
MAX_INPUT_CHARS_PER_WORD = 200

# Ranges `_is_chinese_char` treats as CJK ideographs, inclusive (spec §1.3 step 3).
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)

_LOWER_MODELS = (
    "uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12",
)


class VocabError(ValueError):
    """A vocab file that cannot be used; the message names the file (and line)."""


class DuplicateVocabWarning(UserWarning):
    """A vocab file lists a token more than once (the original silently keeps the later index)."""


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Raise ValueError if `do_lower_case` contradicts the checkpoint's model name (original L28).

    Only the seven released model names are known; anything else (or no match) passes.
    """
    if not init_checkpoint:
        return
    # Unescaped '.' and prefix match are the original's; `.../bert_model.ckpt.index` also matches.
    m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if m is None:
        return
    model_name = m.group(1)

    is_bad_config = False
    if model_name in _LOWER_MODELS and not do_lower_case:
        is_bad_config = True
        actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
    if model_name in _CASED_MODELS and do_lower_case:
        is_bad_config = True
        actual_flag, case_name, opposite_flag = "True", "cased", "False"

    if is_bad_config:
        raise ValueError(
            "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. "
            "However, `%s` seems to be a %s model, so you "
            "should pass in `--do_lower_case=%s` so that the fine-tuning matches "
            "how the model was pre-training. If this error is wrong, please "
            "just comment out this check." % (actual_flag, init_checkpoint,
                                              model_name, case_name, opposite_flag))


def convert_to_unicode(text):
    """str stays str; bytes are decoded as UTF-8 with invalid bytes silently dropped (original)."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s" % (type(text)))


def printable_text(text):
    """Text in a form suitable for print or logging (a str on Python 3)."""
    return convert_to_unicode(text)


def _open_binary(path):
    """Local paths through `open`; URLs such as gs:// through tf.io.gfile (imported only then)."""
    if "://" in path:
        import tensorflow as tf  # Heavy import; local vocabularies do not need it.
        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def read_vocab_lines(vocab_file):
    """The vocab file as a list of stripped tokens, one per line (index = line number - 1).

    Raises:
      VocabError: the file is missing or a line is not valid UTF-8.
    """
    try:
        with _open_binary(vocab_file) as f:
            # A byte-order mark would become part of the first token.
            raw_lines = f.read().removeprefix(b"\xef\xbb\xbf").split(b"\n")
    except (OSError, IOError) as e:  # tf.errors.NotFoundError is an OSError subclass too.
        raise VocabError("cannot read vocab file %s: %s" % (vocab_file, e)) from e
    if raw_lines and not raw_lines[-1]:
        raw_lines.pop()  # The text after a final newline is not a line.
    tokens = []
    for line_no, raw in enumerate(raw_lines, 1):
        try:
            # TF 2.x GFile drops every '\r' (spec §0); strip() then removes surrounding space.
            tokens.append(raw.replace(b"\r", b"").decode("utf-8").strip())
        except UnicodeDecodeError as e:
            raise VocabError("vocab file %s line %d is not valid UTF-8: %s"
                             % (vocab_file, line_no, e)) from e
    return tokens


def load_vocab(vocab_file):
    """Loads a vocabulary file into an OrderedDict token -> index, exactly as the original.

    A repeated token keeps its first position but takes the later index (a
    `DuplicateVocabWarning` names the file and lines); blank lines become the key "".
    """
    vocab = collections.OrderedDict()
    first_line = {}
    duplicates = []
    for index, token in enumerate(read_vocab_lines(vocab_file)):
        if token in vocab:
            duplicates.append("%r (lines %d and %d)" % (token, first_line[token], index + 1))
        else:
            first_line[token] = index + 1
        vocab[token] = index
    if duplicates:
        warnings.warn(
            "vocab file %s has %d duplicate entries; as in the original, the later index wins "
            "and the earlier id has no token: %s"
            % (vocab_file, len(duplicates), ", ".join(duplicates[:20])
               + (", ..." if len(duplicates) > 20 else "")),
            DuplicateVocabWarning, stacklevel=2)
    return vocab


def check_vocab(vocab, vocab_file, required_tokens=REQUIRED_TOKENS):
    """Raise VocabError naming `vocab_file` if it is empty or lacks any of `required_tokens`."""
    if not vocab:
        raise VocabError("vocab file %s is empty" % vocab_file)
    missing = [t for t in required_tokens if t not in vocab]
    if missing:
        raise VocabError("vocab file %s lacks the required token(s) %s (one token per line is "
                         "expected)" % (vocab_file, ", ".join(missing)))


def convert_by_vocab(vocab, items):
    """Converts a sequence of tokens or ids using the vocab; unknown items raise KeyError."""
    output = []
    for item in items:
        try:
            output.append(vocab[item])
        except KeyError:
            raise KeyError("%r is not in the vocabulary" % (item,)) from None
    return output


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Runs basic whitespace cleaning and splitting on a piece of text."""
    text = text.strip()
    if not text:
        return []
    return text.split()


class FullTokenizer(object):
    """Runs end-to-end tokenization: BasicTokenizer, then WordpieceTokenizer."""

    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = load_vocab(vocab_file)
        check_vocab(self.vocab, vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def tokenize(self, text):
        """str or bytes -> list of word-piece strings."""
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            for sub_token in self.wordpiece_tokenizer.tokenize(token):
                split_tokens.append(sub_token)
        return split_tokens

    def convert_tokens_to_ids(self, tokens):
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)


class BasicTokenizer(object):
    """Runs basic tokenization (punctuation splitting, lower casing, etc.)."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        """Tokenizes a piece of text (str or bytes) into a list of str tokens."""
        text = convert_to_unicode(text)
        text = self._clean_text(text)
        # Added in the original for the multilingual and Chinese models (harmless for English).
        text = self._tokenize_chinese_chars(text)

        orig_tokens = whitespace_tokenize(text)
        split_tokens = []
        for token in orig_tokens:
            if self.do_lower_case:
                token = token.lower()
                token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token))

        return whitespace_tokenize(" ".join(split_tokens))

    def _run_strip_accents(self, text):
        """NFD, then drop nonspacing marks (Mn); the result is not recomposed."""
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def _run_split_on_punc(self, text):
        """Splits punctuation on a piece of text: each punctuation char is its own token."""
        chars = list(text)
        i = 0
        start_new_word = True
        output = []
        while i < len(chars):
            char = chars[i]
            if _is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
            i += 1
        return ["".join(x) for x in output]

    def _tokenize_chinese_chars(self, text):
        """Adds whitespace around any CJK character."""
        output = []
        for char in text:
            cp = ord(char)
            if self._is_chinese_char(cp):
                output.append(" ")
                output.append(char)
                output.append(" ")
            else:
                output.append(char)
        return "".join(output)

    def _is_chinese_char(self, cp):
        """Whether `cp` is in one of the CJK Unified Ideographs blocks of CJK_RANGES.

        Hangul, Hiragana and Katakana are deliberately not included: those scripts use spaces.
        """
        return any(lo <= cp <= hi for lo, hi in CJK_RANGES)

    def _clean_text(self, text):
        """Performs invalid character removal and whitespace cleanup on text."""
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xfffd or _is_control(char):
                continue
            if _is_whitespace(char):
                output.append(" ")
            else:
                output.append(char)
        return "".join(output)


class WordpieceTokenizer(object):
    """Runs WordPiece tokenization (greedy longest-match-first)."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        """Tokenizes already basic-tokenized text into word pieces.

        For example: input = "unaffable" -> output = ["un", "##aff", "##able"].
        """
        text = convert_to_unicode(text)

        output_tokens = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue

            is_bad = False
            start = 0
            sub_tokens = []
            while start < len(chars):
                end = len(chars)
                cur_substr = None
                while start < end:
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end

            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


def _is_whitespace(char):
    """Checks whether `char` is a whitespace character (\\t \\n \\r count, as do all Zs)."""
    if char == " " or char == "\t" or char == "\n" or char == "\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Checks whether `char` is a control character (Cc or Cf, but not \\t \\n \\r)."""
    if char == "\t" or char == "\n" or char == "\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """Checks whether `char` is punctuation: every ASCII non-alphanumeric, or Unicode P*."""
    cp = ord(char)
    # "^", "$", "`" etc. are not Unicode P* but are treated as punctuation for consistency.
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(char).startswith("P")
