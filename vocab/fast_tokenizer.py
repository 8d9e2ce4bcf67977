"""Fast WordPiece tokenization on tensorflow-text, word-piece-identical to `FullTokenizer`.

`FastBertTokenizer` is a `tf.Module` made of graph ops only, so it works eagerly, inside
`tf.function` and `tf.data.Dataset.map`, and is exported with a SavedModel (its tables are constants
of the graph). Each batch is split in two routes:

* **ASCII route** (lines of printable ASCII, tab, newline and CR only; practically all English):
  `tf.strings.lower` (ASCII) and tf.text's end-to-end `FastWordpieceTokenizer`. For this alphabet
  tf.text splits whitespace and punctuation exactly as the original, and bytes are characters, so
  `max_bytes_per_word=200` is the original's 200-character limit.
* **Exact route** (everything else): the original BasicTokenizer rebuilt from RE2 rewrites and a
  code-point map generated from this interpreter's `unicodedata` (`vocab.char_tables`): drop
  control/format characters, map whitespace to spaces, space out CJK ideographs, apply CPython's
  final-sigma rule, lower-case + NFD + drop Mn (uncased), space out punctuation, split, turn words
  over 200 code points into `[UNK]`, then `FastWordpieceTokenizer` on the words.

The one known difference (uncased only): NFD's canonical reordering of *non-Mn* characters with a
nonzero combining class (25 code points, e.g. U+1D165..U+1D172 musical stems, U+302E/F Hangul tone
marks, some viramas). The per-character map keeps their input order; when two of them meet out of
canonical order the original reorders them. `tokenize_batch` sends every line with two of them to
the faithful tokenizer, so its output is always identical.
"""
import concurrent.futures
import operator

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from vocab import char_tables
from vocab import tokenization

# Lines the ASCII route handles: printable ASCII plus the three whitespace controls the original
# keeps (every other control character is deleted, which only the exact route does).
_SIMPLE_LINE = "[\\t\\n\\r\\x20-\\x7e]*"
# The ASCII route splits a batch into this many independent ops, which TF runs on parallel threads.
_ASCII_SHARDS = 2
# Placeholder for ids without a token: no input word can contain \x01 (a control character,
# deleted by cleaning, and outside the ASCII route's alphabet). Not \0: darts-clone ends keys there.
_NO_TOKEN = "\x01<no token %d>"


def _tokens_by_id(vocab):
    """List whose entry i is the token with id i, as `inv_vocab` of the original would give it.

    Ids without a token (a duplicate's overwritten id) and the blank token get a placeholder that
    no input can produce, so FastWordpiece sees unique, non-empty tokens at the original ids.
    """
    tokens = [_NO_TOKEN % i for i in range(max(vocab.values()) + 1)]
    for token, index in vocab.items():
        if token:
            tokens[index] = token
    return tokens


class _OfflineState:
    """Python-side state, kept out of tf.Module's tracking.

    tf.Module would wrap list/dict attributes into tracked wrappers with slow item access, and
    would export every tf.function attribute as its own SavedModel function. The graph function
    here is exported only as part of `tokenize`, which calls it.
    """

    def __init__(self, vocab, tokens):
        self.vocab = vocab  # token -> id, as tokenization.load_vocab returns it
        self.tokens = tokens  # id -> token (list)
        self.tokenize_and_flag = None  # the traced graph, shared by tokenize and tokenize_batch


class FastBertTokenizer(tf.Module):
    """Graph-mode BERT tokenizer with the original's word-pieces and `[CLS] A [SEP] B [SEP]` packing.

    Args:
      vocab_file: a `vocab.txt` (one token per line); read and checked like `FullTokenizer`.
      do_lower_case: the original flag: lower-case and strip accents (True) or leave text as is.
    """

    def __init__(self, vocab_file, do_lower_case=True, name=None):
        super().__init__(name=name)
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        vocab = tokenization.load_vocab(vocab_file)
        tokenization.check_vocab(vocab, vocab_file)
        tokens = _tokens_by_id(vocab)
        self._py = _OfflineState(vocab, tokens)
        self._py.tokenize_and_flag = tf.function(
            self._tokenize_and_flag, input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)
        self.unk_id, self.cls_id, self.sep_id = (vocab[t] for t in tokenization.REQUIRED_TOKENS)

        self._token_strings = tf.constant(tokens)
        self._ascii_wordpiece = tf_text.FastWordpieceTokenizer(
            tokens, max_bytes_per_word=tokenization.MAX_INPUT_CHARS_PER_WORD,
            token_out_type=tf.int32, no_pretokenization=False)
        # Words are at most 200 code points here (longer ones are already "[UNK]"): 4 bytes each.
        self._word_wordpiece = tf_text.FastWordpieceTokenizer(
            tokens, max_bytes_per_word=4 * tokenization.MAX_INPUT_CHARS_PER_WORD,
            token_out_type=tf.int32, no_pretokenization=True)

        t = char_tables.tables()
        self._rules = t
        if do_lower_case:
            # A sentinel key past every code point keeps searchsorted results in range.
            self._map_keys = tf.constant(np.append(t.map_keys, np.int32(0x7FFFFFFF)))
            self._map_starts = tf.constant(np.append(t.map_starts, np.int32(0)))
            self._map_lengths = tf.constant(np.append(t.map_lengths, np.int32(1)))
            self._map_values = tf.constant(t.map_values)

    @property
    def vocab(self):
        """{token: id} of the vocabulary, as `tokenization.load_vocab` returns it."""
        return self._py.vocab

    # ------------------------------------------------------------------ graph API
    # AutoGraph stays off (and out of `pack`): these graphs have no Python control flow on
    # tensors (`tf.cond` is spelled out), and converting them and tf.text's code they call was
    # most of the tracing of a module that tokenizes (predict.py's first answer).

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, texts):
        """string [N] (UTF-8) -> int32 RaggedTensor [N, (pieces)] of word-piece ids.

        Same ids as `FullTokenizer` (see the module docstring for the one exception). Invalid
        UTF-8 bytes are dropped, as the original's `convert_to_unicode` does.
        """
        ids, _ = self._py.tokenize_and_flag(texts)
        return ids

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize_to_strings(self, texts):
        """string [N] (UTF-8) -> string RaggedTensor [N, (pieces)] of word-pieces."""
        return tf.ragged.map_flat_values(tf.gather, self._token_strings, self.tokenize(texts))

    @tf.autograph.experimental.do_not_convert
    def pack(self, ids_a, ids_b=None, max_seq_length=128):
        """Builds the original classifier inputs from word-piece ids: `vocab.packing`, vectorised.

        Layout `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, zero-padded to `max_seq_length`. A pair is
        truncated like the original `_truncate_seq_pair` (pop from the end of the longer list,
        ties pop from B) to `max_seq_length - 3`; a single sequence, or a pair whose B is empty
        (the original's `if tokens_b:`), is cut to `max_seq_length - 2`.

        Args:
          ids_a, ids_b: int RaggedTensor [N, (pieces)] (e.g. from `tokenize`); ids_b may be None.
          max_seq_length: Python int S >= 3 (2 without ids_b).
        Returns:
          dict of int32 [N, S] tensors: input_ids, input_mask, segment_ids.
        """
        seq = max_seq_length
        ids_a = tf.cast(ids_a, tf.int32)
        if ids_b is None:
            ids_b = tf.RaggedTensor.from_row_lengths(
                tf.zeros([0], tf.int32), tf.zeros_like(ids_a.row_lengths()), validate=False)
        ids_b = tf.cast(ids_b, tf.int32)
        len_a = tf.cast(ids_a.row_lengths(), tf.int32)
        len_b = tf.cast(ids_b.row_lengths(), tf.int32)
        has_b = (len_b > 0)[:, None]
        keep_a, keep_b = truncated_pair_lengths(
            len_a, len_b, tf.where(has_b[:, 0], seq - 3, seq - 2))
        keep_a, keep_b = keep_a[:, None], keep_b[:, None]

        # Positions: 0 [CLS] | 1..keep_a A | keep_a+1 [SEP] | B | b_end [SEP] (pairs) | padding.
        pos = tf.range(seq)[None, :]
        b_start = keep_a + 2
        b_end = b_start + keep_b
        a = ids_a.to_tensor(0, shape=[None, seq])
        b = ids_b.to_tensor(0, shape=[None, seq])
        from_a = tf.pad(a, [[0, 0], [1, 0]])[:, :seq]  # A shifted right past [CLS]
        from_b = tf.gather(b, tf.clip_by_value(pos - b_start, 0, seq - 1), batch_dims=1)
        is_sep = (pos == keep_a + 1) | (has_b & (pos == b_end))
        input_ids = tf.where(
            pos == 0, self.cls_id,
            tf.where((pos >= 1) & (pos <= keep_a), from_a,
                     tf.where(is_sep, self.sep_id,
                              tf.where((pos >= b_start) & (pos < b_end), from_b, 0))))
        length = tf.where(has_b, b_end + 1, b_start)
        return {
            "input_ids": input_ids,
            "input_mask": tf.cast(pos < length, tf.int32),
            "segment_ids": tf.cast(has_b & (pos >= b_start) & (pos < length), tf.int32),
        }

    # ------------------------------------------------------------------ offline API

    def tokenize_batch(self, texts, batch_size=8192):
        """list of str (or bytes) -> list[list[str]], exactly `FullTokenizer.tokenize` of each.

        Lines the graph may get wrong go to the faithful Python tokenizer instead: lines that
        are not encodable as UTF-8 (lone surrogates), and, when lower-casing, lines with two or
        more non-Mn combining characters (see the module docstring). On real text this is
        practically never. bytes items are accepted and decoded like the original does.

        Chunks of `batch_size` lines run through the graph on a worker thread while the previous
        chunk's result is turned into Python lists, so both cores are busy.
        """
        out = []
        for chunk, ids, fallback in self._graph_batches(texts, batch_size):
            out.extend(self._to_pieces(chunk, ids, fallback))
        return out

    def tokenize_batch_ids(self, texts, batch_size=8192):
        """list of str (or bytes) -> (ids, row_splits): the ids of `tokenize_batch`, flat.

        Text i has the word-piece ids `ids[row_splits[i]:row_splits[i + 1]]`, exactly
        `FullTokenizer.convert_tokens_to_ids(FullTokenizer.tokenize(text))` (with the same
        fallback as `tokenize_batch`). No Python list per token is made: for bulk work such as
        pre-training data, this is several times faster than `tokenize_batch`.

        Returns:
          ids: int32 numpy array [total pieces]; row_splits: int64 numpy array [len(texts) + 1].
        """
        flat, lengths = [], []
        for chunk, ids, fallback in self._graph_batches(texts, batch_size):
            chunk_ids = ids.flat_values.numpy()
            chunk_lengths = np.diff(ids.row_splits.numpy())
            if fallback:
                rows = np.split(chunk_ids, np.cumsum(chunk_lengths)[:-1])
                vocab = self._py.vocab
                for i in fallback:
                    rows[i] = np.array([vocab[p] for p in self._faithful_tokenize(chunk[i])],
                                       np.int32)
                chunk_ids = np.concatenate(rows).astype(np.int32)
                chunk_lengths = np.array([len(row) for row in rows], np.int64)
            flat.append(chunk_ids)
            lengths.append(chunk_lengths)
        row_splits = np.zeros(len(texts) + 1, np.int64)
        if texts:
            np.cumsum(np.concatenate(lengths), out=row_splits[1:])
        return (np.concatenate(flat) if flat else np.zeros([0], np.int32)), row_splits

    def _graph_batches(self, texts, batch_size):
        """Yields (texts chunk, ids RaggedTensor, fallback line indices) per `batch_size` lines.

        With several chunks, the next one runs through the graph on a worker thread while the
        caller converts the current one.
        """
        chunks = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
        if len(chunks) == 1:  # nothing to overlap: spare the thread
            yield (chunks[0],) + self._run_graph(chunks[0])
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(self._run_graph, chunks[0]) if chunks else None
            for index, chunk in enumerate(chunks):
                ids, fallback = pending.result()
                if index + 1 < len(chunks):
                    pending = pool.submit(self._run_graph, chunks[index + 1])
                yield chunk, ids, fallback

    def _run_graph(self, texts):
        """(ids RaggedTensor, indices of lines for the faithful tokenizer) for a list of texts."""
        fallback = []
        try:
            batch = tf.constant(texts, tf.string)  # bytes pass through, str is UTF-8 encoded
        except ValueError:  # not UTF-8 encodable (a lone surrogate): sort it out line by line
            encoded = []
            for i, text in enumerate(texts):
                try:
                    encoded.append(tokenization.convert_to_unicode(text).encode("utf-8"))
                except UnicodeEncodeError:
                    encoded.append(b"")
                    fallback.append(i)
            batch = tf.constant(encoded, tf.string)
        ids, flags = self._py.tokenize_and_flag(batch)
        return ids, fallback + np.flatnonzero(flags.numpy()).tolist()

    def _to_pieces(self, texts, ids, fallback):
        flat = ids.flat_values.numpy().tolist()
        splits = ids.row_splits.numpy().tolist()
        tokens = self._py.tokens
        pieces = list(operator.itemgetter(*flat)(tokens)) if len(flat) > 1 else [
            tokens[i] for i in flat]
        result = [pieces[splits[i]:splits[i + 1]] for i in range(len(texts))]
        for i in fallback:
            result[i] = self._faithful_tokenize(texts[i])
        return result

    def _faithful_tokenize(self, text):
        """FullTokenizer.tokenize on this tokenizer's vocab (without re-reading the file)."""
        basic = tokenization.BasicTokenizer(do_lower_case=self.do_lower_case)
        wordpiece = tokenization.WordpieceTokenizer(vocab=self._py.vocab)
        return [piece for token in basic.tokenize(text) for piece in wordpiece.tokenize(token)]

    # ------------------------------------------------------------------ internals

    def _tokenize_and_flag(self, texts):
        """(ids int32 RaggedTensor [N, (pieces)], needs_fallback bool [N])."""
        simple = tf.strings.regex_full_match(texts, _SIMPLE_LINE)

        def all_simple():
            return self._ascii_route(texts), tf.zeros_like(simple)

        def mixed():
            simple_rows = tf.where(simple)[:, 0]
            other_rows = tf.where(tf.logical_not(simple))[:, 0]
            other = tf.gather(texts, other_rows)
            ids = tf.concat([self._ascii_route(tf.gather(texts, simple_rows)),
                             self._exact_route(other)], axis=0)
            flags = tf.concat([tf.zeros_like(simple_rows, tf.bool), self._reorder_hazard(other)], 0)
            inverse = tf.math.invert_permutation(tf.concat([simple_rows, other_rows], 0))
            return tf.gather(ids, inverse), tf.gather(flags, inverse)

        return tf.cond(tf.reduce_all(simple), all_simple, mixed)

    def _ascii_route(self, texts):
        if self.do_lower_case:
            texts = tf.strings.lower(texts)
        n = tf.shape(texts)[0]
        bounds = [n * i // _ASCII_SHARDS for i in range(_ASCII_SHARDS + 1)]
        return tf.concat([
            self._ascii_wordpiece.tokenize(texts[bounds[i]:bounds[i + 1]]).with_row_splits_dtype(
                tf.int64) for i in range(_ASCII_SHARDS)], axis=0)

    def _exact_route(self, texts):
        """The original BasicTokenizer in RE2 rewrites, then WordPiece on its words.

        Whitespace tokens are processed once per distinct token: everything after the
        original's whitespace split (lower-casing, accents, punctuation, word-pieces) depends
        on the token alone, and natural text repeats its tokens a lot.
        """
        rules = self._rules
        # convert_to_unicode drops invalid UTF-8 bytes.
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")
        texts = tf.strings.regex_replace(texts, rules.delete_class, "")
        texts = tf.strings.regex_replace(texts, rules.space_class, " ")
        texts = tf.strings.regex_replace(texts, rules.cjk_class, " \\0 ")
        tokens = tf.strings.split(texts)  # splits on ASCII whitespace, all that is left
        distinct, index = tf.unique(tokens.flat_values)
        pieces = tf.gather(self._tokenize_tokens(distinct), index)
        return grouped_rows(tokens.row_splits, pieces).with_row_splits_dtype(tf.int64)

    def _tokenize_tokens(self, tokens):
        """Whitespace-free tokens [T] -> int32 RaggedTensor [T, (pieces)]."""
        rules = self._rules
        if self.do_lower_case:
            tokens = tf.strings.regex_replace(
                tokens, rules.final_sigma_pattern, rules.final_sigma_rewrite)
            tokens = self._lower_strip_accents(tokens)
        tokens = tf.strings.regex_replace(tokens, rules.punct_class, " \\0 ")
        words = tf.strings.split(tokens)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > (
            tokenization.MAX_INPUT_CHARS_PER_WORD)
        # The word "[UNK]" is word-pieced to exactly the [UNK] token (it is in the vocab, and no
        # real word can contain '[' any more: it is punctuation).
        words = words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))
        return grouped_rows(words.row_splits, self._word_wordpiece.tokenize(words.flat_values))

    def _lower_strip_accents(self, texts):
        """Per code point c: strip_accents(c.lower()) from the generated map (ragged expansion)."""
        chars = tf.strings.unicode_decode(texts, "UTF-8")
        cps = chars.flat_values
        slot = tf.searchsorted(self._map_keys, cps)
        hit = tf.gather(self._map_keys, slot) == cps
        lengths = tf.where(hit, tf.gather(self._map_lengths, slot), 1)
        owner = tf.repeat(tf.range(tf.size(cps)), lengths)  # source char of each output char
        first_out = tf.cumsum(lengths, exclusive=True)
        within = tf.range(tf.size(owner)) - tf.gather(first_out, owner)
        mapped = tf.gather(self._map_values,
                           tf.gather(tf.gather(self._map_starts, slot), owner) + within)
        out = tf.where(tf.gather(hit, owner), mapped, tf.gather(cps, owner))
        written = tf.RaggedTensor.from_row_lengths(out, tf.cast(lengths, tf.int64),
                                                   validate=False)  # [chars, (outputs)]
        return tf.strings.unicode_encode(grouped_rows(chars.row_splits, written), "UTF-8")

    def _reorder_hazard(self, texts):
        """Rows where the per-character map may differ from NFD (see module docstring)."""
        if not self.do_lower_case:
            return tf.zeros(tf.shape(texts), tf.bool)
        cls = self._rules.reorder_class
        return tf.strings.regex_full_match(texts, "(?s).*%s.*%s.*" % (cls, cls))


def truncated_pair_lengths(len_a, len_b, budget):
    """Lengths the original `_truncate_seq_pair` leaves (vectorised, deterministic).

    It pops from A while A is longer, otherwise from B, until len_a + len_b <= budget: the longer
    list shrinks first, then they alternate, so A keeps ceil(budget/2) and B floor(budget/2) when
    both are long.
    """
    over = len_a + len_b > budget
    half_up = (budget + 1) // 2
    keep_a = tf.minimum(len_a, tf.maximum(half_up, budget - len_b))
    keep_b = tf.minimum(len_b, budget - keep_a)
    return tf.where(over, keep_a, len_a), tf.where(over, keep_b, len_b)


def grouped_rows(row_splits, rows):
    """The RaggedTensor `rows` [K, (P)] grouped by `row_splits` [N + 1] (a RaggedTensor's, of K
    values): [N, (pieces)], e.g. each text's word-pieces from each word's. The same as
    `RaggedTensor.from_row_splits(rows, row_splits).merge_dims(1, 2)`, built unchecked: the
    splits are sorted by construction, and each check is a conditional in the graph that its
    first call's optimisation pays for."""
    return tf.RaggedTensor.from_row_splits(
        rows.flat_values, tf.gather(rows.row_splits, row_splits), validate=False)
