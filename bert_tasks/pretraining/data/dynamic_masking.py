"""Dynamic masking: run_pretraining masks in `tf.data`, anew for every batch (so every epoch),
from one-sentence-per-line text or from unmasked pair records; no dupe_factor copies on disk.

    run_pretraining.py --input_format=text --input_file=corpus.txt \\
      --vocab_file=vocab.txt --do_lower_case=True --do_whole_word_mask ...

Two stages:

* **Pairs** (`TextPairs`, `--input_format=text`): the text is read and tokenized once, as
  create_pretraining_data reads it (`documents.build_documents`); pass k makes the sentence
  pairs of the original algorithm (`InstanceBuilder`: target lengths, A/B split, random next
  sentence, truncation; one pass = one dupe_factor copy) with its own
  `random.Random(chunk_seed(random_seed, k))`, without masking, shuffled as the original
  shuffles its instances. `DynamicInput.PAIRING_PASSES` (10, the original's default
  dupe_factor) passes are made in memory and read in turn (a dataset of tensors, so
  checkpoints hold its position); the masks are new every batch. `--input_format=unmasked_records`
  reads pairs from create_pretraining_data records made with `--mask_token_prob=0
  --random_token_prob=0` (their `input_ids` hold the text; their masked_lm_* features are
  ignored), e.g. written by the Beam pipeline from a corpus too large for memory.
* **Masks** (`Masker`, a `tf.data` map on each batch, stateless random ops seeded by the run's
  seed and the batch number): the original `create_masked_lm_predictions`, vectorized. Every
  token but [CLS] and [SEP] is a candidate; with whole-word masking a `##` piece joins the
  candidate before it (also across the middle [SEP], as the original); candidates (or words)
  are taken in random order while they fit in `min(max_predictions_per_seq, max(1,
  round_half_even(length * masked_lm_prob)))` word-pieces (a word that does not fit is skipped,
  a later shorter one may still fit); each chosen word-piece becomes [MASK] with
  `mask_token_prob`, a random vocab entry with `random_token_prob`, else stays. The random
  numbers are TensorFlow's, not CPython's: the masks follow the same distribution as
  create_pretraining_data's, not the same draws (tests/test_dynamic_masking.py compares them).
"""
import dataclasses
import random

import numpy as np
from absl import flags
from absl import logging

from bert_runner.flag_ranges import CrossRule, cross, ranged, within
from bert_runner.packing import FirstFit
from bert_tasks.pretraining.data.instances import InstanceBuilder, MaskingRates, masked_count
from bert_tasks.pretraining.data.processing import chunk_seed

INPUT_FORMATS = ("records", "text", "unmasked_records")
# The masking rates of create_pretraining_data.py and of dynamic masking.
MASKING_RATES = CrossRule(
    ("mask_token_prob", "random_token_prob"),
    lambda mask, random: mask + random <= 1.0 + 1e-9,
    lambda mask, random: (f"mask_token_prob plus random_token_prob is {mask + random:g}, more "
                          "than 1 (the rest, kept unchanged, cannot be negative)"),
    "mask_token_prob + random_token_prob must be <= 1")


def masked_lm_prob_range():
    """0 is refused: the instances mask max(1, round(len * masked_lm_prob)) tokens, so 0 would
    still mask one per sequence (`pipeline.check_options`, for callers in Python, accepts it)."""
    return within(0, 1, low_open=True)


def define_flags():
    """run_pretraining.py's flags for dynamic masking (create_pretraining_data's names)."""
    flags.DEFINE_enum(
        "input_format", "records", list(INPUT_FORMATS),
        "records: create_pretraining_data's masked records (the original). text: "
        "one-sentence-per-line text, a blank line between documents (create_pretraining_data's "
        "input), paired and masked in tf.data anew each epoch. unmasked_records: records of "
        "create_pretraining_data.py --mask_token_prob=0 --random_token_prob=0, masked anew each "
        "epoch. text and unmasked_records need --vocab_file.")
    flags.DEFINE_bool("do_whole_word_mask", False,
                      "Dynamic masking: mask whole words (a ## piece joins the piece before it).")
    ranged(flags.DEFINE_float("masked_lm_prob", 0.15,
                              "Dynamic masking: fraction of tokens masked."),
           masked_lm_prob_range())
    ranged(flags.DEFINE_float("mask_token_prob", 0.8,
                              "Dynamic masking: share of the chosen word-pieces that become "
                              "[MASK]."), within(0, 1))
    ranged(flags.DEFINE_float("random_token_prob", 0.1,
                              "Dynamic masking: share that become a random vocab entry (the rest "
                              "stay)."), within(0, 1))
    ranged(flags.DEFINE_float("short_seq_prob", 0.1,
                              "--input_format=text: probability of a shorter target length."),
           within(0, 1))
    flags.DEFINE_integer(
        "max_sequences_per_row", 1,
        "--input_format=text: more than 1 packs up to this many pairs in a row instead of "
        "padding (bert_tasks/pretraining/data/packing.py), each pair masked as unpacked; "
        "max_predictions_per_seq is then a row's capacity. Records carry their own packing "
        "(create_pretraining_data.py --max_sequences_per_row).", lower_bound=1)
    cross(MASKING_RATES)


@dataclasses.dataclass(frozen=True)
class MaskingOptions(object):
    """What dynamic masking needs besides the task's shapes: run_pretraining's flags of these
    names (`bert_runner.flags.config_from_flags`)."""
    input_format: str = "text"
    vocab_file: str = None
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    masked_lm_prob: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    short_seq_prob: float = 0.1
    random_seed: int = 12345
    max_sequences_per_row: int = 1

    def dynamic(self):
        """These options where `input_format` masks in tf.data (text, unmasked_records); None
        for records (they hold their masks). Raises ValueError (a refusal) for a dynamic format
        without `--vocab_file`, and for packing other than text's."""
        per_row = self.max_sequences_per_row
        if per_row > 1 and (self.input_format != "text" or self.do_whole_word_mask):
            raise ValueError(
                "--max_sequences_per_row=%d packs --input_format=text without "
                "--do_whole_word_mask; records carry their own packing "
                "(create_pretraining_data.py --max_sequences_per_row)" % per_row)
        if self.input_format == "records":
            return None
        if not self.vocab_file:
            raise ValueError("--input_format=%s needs --vocab_file (and --do_lower_case): the "
                             "masks are made from the vocabulary's ids" % self.input_format)
        return self


class _PairBuilder(InstanceBuilder):
    """`InstanceBuilder` that pairs and truncates but leaves the masking to `Masker`."""

    def create_masked_lm_predictions(self, tokens, num_a_tokens, rng):
        return [], []


class TextPairs(object):
    """Unmasked sentence pairs of a tokenized corpus, a new set (and order) every pass.

    Args:
      documents: from `build_documents` (empty documents are dropped).
      vocab: token -> id (`FullTokenizer.vocab`).
      max_seq_length, short_seq_prob, next_sentence: as create_pretraining_data.
      seed: the run's seed; pass k uses `random.Random(chunk_seed(seed, k))`.
    """

    pack_options = None
    # The pairs a row of `arrays()` holds on average (more than 1 once packed).
    pairs_per_row = 1.0

    def __init__(self, documents, vocab, max_seq_length, short_seq_prob, next_sentence, seed):
        self.documents = [d for d in documents if d]
        self.builder = _PairBuilder(vocab, max_seq_length, short_seq_prob, 0.0, 1,
                                    next_sentence=next_sentence)
        self.max_seq_length, self.next_sentence, self.seed = max_seq_length, next_sentence, seed

    def pack(self, max_sequences_per_row, max_predictions_per_seq, masked_lm_prob):
        """Packs `arrays()`' pairs up to `max_sequences_per_row` a row (`FirstFit`),
        each pair's masked tokens (`Masker`'s count) within the row's max_predictions_per_seq."""
        self.pack_options = (max_sequences_per_row, max_predictions_per_seq, masked_lm_prob)
        return self

    def instances(self, epoch):
        """The `TrainingInstance`s (unmasked) of pass `epoch`, shuffled."""
        return self.builder.create_training_instances(
            list(self.documents), 1, random.Random(chunk_seed(self.seed, epoch)))

    def arrays(self, num_passes):
        """The pairs of passes 0 .. num_passes - 1, one after the other, as numpy arrays:
        input_ids int32 [N, max_seq_length] (0-padded), length, num_a_tokens and
        next_sentence_labels int32 [N]."""
        instances = [i for epoch in range(num_passes) for i in self.instances(epoch)]
        ids = np.zeros((len(instances), self.max_seq_length), np.int32)
        for row, instance in enumerate(instances):
            ids[row, :len(instance.input_ids)] = instance.input_ids
        arrays = {"input_ids": ids,
                  "length": np.fromiter((len(i.input_ids) for i in instances), np.int32),
                  "num_a_tokens": np.fromiter((i.num_a_tokens for i in instances), np.int32),
                  "next_sentence_labels": np.fromiter((i.is_random_next for i in instances),
                                                      np.int32)}
        return arrays if self.pack_options is None else self._packed(arrays)

    def _packed(self, arrays):
        """`arrays` packed: input_ids [R, max_seq_length] (the pairs one after another) and
        length, num_a_tokens, next_sentence_labels [R, K] per slot (0 in empty slots)."""
        slots, max_predictions, masked_lm_prob = self.pack_options
        fit = FirstFit(self.max_seq_length, max_predictions, slots)
        rows = []
        for pair, length in enumerate(arrays["length"]):
            rows += fit.add(pair, int(length), masked_count(int(length), max_predictions,
                                                            masked_lm_prob))
        rows += fit.flush()
        pairs, num_rows, unpacked, packed = fit.stats()
        self.pairs_per_row = pairs / max(num_rows, 1)
        logging.info("Packed %d pairs into %d rows of up to %d: padding %.1f%% of the tokens, "
                     "%.1f%% unpacked", pairs, num_rows, slots, 100 * packed, 100 * unpacked)
        out = {"input_ids": np.zeros((len(rows), self.max_seq_length), np.int32)}
        for name in ("length", "num_a_tokens", "next_sentence_labels"):
            out[name] = np.zeros((len(rows), slots), np.int32)
        for r, row in enumerate(rows):
            start = 0
            for slot, pair in enumerate(row):
                length = arrays["length"][pair]
                out["input_ids"][r, start:start + length] = arrays["input_ids"][pair, :length]
                for name in ("length", "num_a_tokens", "next_sentence_labels"):
                    out[name][r, slot] = arrays[name][pair]
                start += length
        return out

    def features(self, arrays):
        """`arrays` (rows of `arrays()`, any leading shape) -> the model's unmasked features."""
        import tensorflow as tf
        if self.pack_options is not None:
            return self._packed_features(arrays)
        positions = tf.range(self.max_seq_length)
        length = arrays["length"][..., None]
        features = {
            "input_ids": arrays["input_ids"],
            "input_mask": tf.cast(positions < length, tf.int32),
            "segment_ids": tf.cast((positions >= arrays["num_a_tokens"][..., None] + 2)
                                   & (positions < length), tf.int32),
        }
        if self.next_sentence:
            features["next_sentence_labels"] = arrays["next_sentence_labels"][..., None]
        return features


    def _packed_features(self, arrays):
        """Packed rows' features (`bert_tasks.pretraining.data.packing`'s schema) of `_packed` arrays `[B, ...]`."""
        import tensorflow as tf
        lengths = arrays["length"]                                   # [B, K]
        starts = tf.cumsum(lengths, axis=-1, exclusive=True)         # [B, K]
        filled = lengths > 0
        positions = tf.range(self.max_seq_length)[None, :, None]    # [1, S, 1]
        inside = (positions >= starts[:, None]) & (positions < (starts + lengths)[:, None])
        slot = tf.argmax(tf.cast(inside, tf.int32), axis=-1, output_type=tf.int32)   # [B, S]
        real = tf.reduce_any(inside, axis=-1)
        start = tf.gather(starts, slot, batch_dims=1)
        num_a = tf.gather(arrays["num_a_tokens"], slot, batch_dims=1)
        offset = positions[..., 0] - start
        features = {
            "input_ids": arrays["input_ids"],
            "input_mask": tf.cast(real, tf.int32),
            "segment_ids": tf.cast(real & (offset >= num_a + 2), tf.int32),
            "position_ids": tf.where(real, offset, 0),
            "sequence_ids": tf.where(real, slot + 1, 0),
            "sequence_starts": tf.where(filled, starts, 0),
        }
        if self.next_sentence:
            features["next_sentence_labels"] = arrays["next_sentence_labels"]
        return features


class Masker(object):
    """The original's masking of a batch of unmasked pairs, in TensorFlow (see the module doc).

    Args:
      vocab: token -> id in file order (random replacements are drawn from it, as the original
        draws from `list(vocab)`).
      max_predictions_per_seq, masked_lm_prob, do_whole_word_mask: as create_pretraining_data.
      masking_rates: `MaskingRates`.
    Call: `masker(features, seed)`: features `{input_ids, input_mask, segment_ids, ...}` int32
      `[B, L]`, seed int `[2]` -> the same dict with input_ids masked and masked_lm_positions,
      masked_lm_ids `[B, P]` int32, masked_lm_weights `[B, P]` float32 added.
    """

    def __init__(self, vocab, max_predictions_per_seq, masked_lm_prob, do_whole_word_mask=False,
                 masking_rates=MaskingRates()):
        import tensorflow as tf
        self.cls_id, self.sep_id, self.mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
        self.replacement_ids = tf.constant([vocab[w] for w in vocab], tf.int32)
        subword = np.zeros(max(vocab.values()) + 1, bool)
        subword[[i for w, i in vocab.items() if w.startswith("##")]] = True
        self.is_subword = tf.constant(subword)
        self.max_predictions = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.do_whole_word_mask = do_whole_word_mask
        self.mask_prob = masking_rates.mask
        self.keep_threshold = masking_rates.keep_threshold

    def __call__(self, features, seed):
        import tensorflow as tf
        ids = features["input_ids"]
        batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
        real = features["input_mask"] > 0
        candidate = real & (ids != self.cls_id) & (ids != self.sep_id)
        # round() half to even on float64, as Python's round(len(tokens) * masked_lm_prob).
        num_tokens = tf.reduce_sum(tf.cast(real, tf.float64), axis=1)
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
        # The original shuffles the candidates (or words): a uniform key each, taken in order.
        key = tf.random.stateless_uniform([batch, length], seeds[0])
        if "sequence_ids" in features:  # packed rows: each pair's own count, from its own keys
            same = features["sequence_ids"][:, :, None] == features["sequence_ids"][:, None, :]
            num_tokens = tf.reduce_sum(tf.cast(same & real[:, None, :], tf.float64), axis=2)
        num_to_predict = tf.minimum(
            tf.cast(self.max_predictions, tf.int32),
            tf.maximum(1, tf.cast(tf.round(num_tokens * self.masked_lm_prob), tf.int32)))
        if "sequence_ids" in features:
            rank = tf.reduce_sum(tf.cast(same & candidate[:, None, :]
                                         & (key[:, None, :] < key[:, :, None]), tf.int32), axis=2)
            taken = candidate & (rank < num_to_predict)
            k = self._max_positions(ids)
            first = tf.math.top_k(-tf.where(taken, tf.range(length)[None], length), k).indices
            chosen = tf.gather(taken, first, batch_dims=1)
            positions = tf.sort(tf.where(chosen, first, length), axis=1)
        elif self.do_whole_word_mask:
            positions = self._whole_words(ids, candidate, key, num_to_predict)
        else:  # the num_to_predict candidates of smallest key, in ascending position
            k = self._max_positions(ids)
            first = tf.math.top_k(-tf.where(candidate, key, 2.0), k).indices
            taken = (tf.range(k) < num_to_predict[:, None]) & tf.gather(
                candidate, first, batch_dims=1)
            positions = tf.sort(tf.where(taken, first, length), axis=1)
        # positions [B, k <= P], ascending, `length` past the chosen ones.
        weights = positions < length
        positions = tf.where(weights, positions, 0)
        labels = tf.gather(ids, positions, batch_dims=1)
        # Each chosen word-piece: [MASK], else kept, else a random vocab entry.
        shape = tf.shape(positions)
        draw = tf.random.stateless_uniform(tf.concat([[2], shape], 0), seeds[1])
        replacement = tf.gather(self.replacement_ids, tf.random.stateless_uniform(
            shape, seeds[2], 0, tf.shape(self.replacement_ids)[0], tf.int32))
        new_ids = tf.where(draw[0] < self.mask_prob, self.mask_id,
                           tf.where(draw[1] < self.keep_threshold, labels, replacement))
        rows = tf.broadcast_to(tf.range(batch)[:, None], shape)
        # Unweighted entries write position 0's own id back ([CLS], never a candidate).
        out = dict(features)
        out["input_ids"] = tf.tensor_scatter_nd_update(
            ids, tf.stack([rows, positions], axis=-1), tf.where(weights, new_ids, labels))
        out["masked_lm_positions"] = self._pad(positions)
        out["masked_lm_ids"] = self._pad(tf.where(weights, labels, 0))
        out["masked_lm_weights"] = self._pad(tf.cast(weights, tf.float32))
        return out

    def _max_positions(self, ids):
        """Positions a sequence can have masked: max_predictions_per_seq, or fewer when the
        sequences are shorter (top_k needs k <= length)."""
        length = ids.shape[1]
        return self.max_predictions if length is None else min(self.max_predictions, length)

    def _pad(self, values):
        """`values [B, k]` -> `[B, max_predictions_per_seq]`, 0-padded."""
        import tensorflow as tf
        return tf.pad(values, [[0, 0], [0, self.max_predictions - tf.shape(values)[1]]])

    def _whole_words(self, ids, candidate, key, num_to_predict):
        """Whole-word masking: the words in random order (by `key` at their first piece), each
        taken if it still fits (the original's greedy choice). Returns the positions of the
        taken pieces `[B, k]`, ascending, `length` past them."""
        import tensorflow as tf
        length = tf.shape(ids)[1]
        # A word starts at a candidate that is not ## or has no candidate before it (a ## after
        # the middle [SEP] joins the last word of A, as the original); `word` numbers them.
        earlier = tf.cumsum(tf.cast(candidate, tf.int32), axis=1, exclusive=True) > 0
        start = candidate & ~(tf.gather(self.is_subword, ids) & earlier)
        word = tf.where(candidate, tf.cumsum(tf.cast(start, tf.int32), axis=1) - 1, length)
        word_size = tf.math.bincount(word, minlength=length + 1, maxlength=length + 1, axis=-1)
        # The words in random order: their starts by ascending key (the other positions last).
        order = tf.math.top_k(-tf.where(start, key, 2.0), length).indices
        word_in_order = tf.where(tf.gather(start, order, batch_dims=1),
                                 tf.gather(word, order, batch_dims=1), length)
        size = tf.gather(word_size, word_in_order, batch_dims=1) * tf.cast(
            word_in_order < length, tf.int32)
        taken = _greedy_fit(size, num_to_predict)
        taken_word = tf.math.bincount(tf.where(taken, word_in_order, length), minlength=length + 1,
                                      maxlength=length + 1, axis=-1) > 0
        chosen = candidate & tf.gather(taken_word, word, batch_dims=1)
        # The chosen positions, ascending: the largest of (length - position).
        k = self._max_positions(ids)
        flipped = tf.math.top_k(tf.where(chosen, length - tf.range(length), 0), k).values
        return length - flipped


def _greedy_fit(size, capacity):
    """The original's greedy choice: items in order, each taken if it still fits.

    Args: size int32 `[B, K]` of the items in order (0: no item); capacity int32 `[B]`.
    Returns: bool `[B, K]`, the items taken.

    An item that does not fit never fits later (what is left only shrinks), so each round
    drops the items larger than what is left and takes the longest prefix of the rest that
    fits; the first item past it does not fit, so what is left becomes smaller than that
    item: a few rounds (fewer than the longest item), not one per item.
    """
    import tensorflow as tf

    def round_(left, open_, taken):
        open_ = open_ & (size <= left[:, None])
        filled = tf.cumsum(tf.where(open_, size, 0), axis=1)
        take = open_ & (filled <= left[:, None])
        left = left - tf.reduce_sum(tf.where(take, size, 0), axis=1)
        return left, open_ & ~take, taken | take

    def more(left, open_, taken):
        return tf.reduce_any(open_ & (size <= left[:, None]))

    _, _, taken = tf.while_loop(
        more, round_, (capacity, size > 0, tf.zeros_like(size, tf.bool)),
        maximum_iterations=tf.shape(size)[1])
    return taken


def masked_dataset(batches, masker, seed):
    """`batches` (a dataset of unmasked pair batches) with masks drawn per batch: batch k uses
    the stateless seed (seed, k), so every epoch gets new masks and a run is reproducible."""
    import tensorflow as tf
    return batches.enumerate().map(
        tf.autograph.experimental.do_not_convert(
            lambda k, features: masker(features, tf.stack([tf.cast(seed, tf.int64), k]))),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def text_dataset(pairs, masker, batch_size, seed, num_passes, repeat=True, input_context=None):
    """The dataset of masked batches of `TextPairs` (one pipeline's share with `input_context`).

    The pairs of `num_passes` passes are made here, in memory (the same variety of pairs as
    create_pretraining_data's dupe_factor copies), and read in turn; the masks are new for every
    batch. A dataset of tensors, so the trainer's checkpoints hold its position.
    """
    import tensorflow as tf
    shard = input_context.input_pipeline_id if input_context else 0
    d = tf.data.Dataset.from_tensor_slices(pairs.arrays(num_passes))
    if input_context and input_context.num_input_pipelines > 1:
        d = d.shard(input_context.num_input_pipelines, shard)
    if repeat:
        d = d.repeat()
    # One map makes the features and masks them (each map is a pass of tf.data's executor).
    return masked_dataset(d.batch(batch_size, drop_remainder=True),
                          lambda arrays, seed_k: masker(pairs.features(arrays), seed_k),
                          seed * 1000003 + shard)


class DynamicInput(object):
    """run_pretraining's input with dynamic masking: `PretrainingTask.dynamic_input`.

    Args:
      options: `MaskingOptions`.
      max_seq_length, max_predictions_per_seq: the task's shapes.
      tokenizer: `documents.LineTokenizer`'s kind for the text; "auto" (the fast one, whose
        graph takes seconds to build) or "faithful" (quicker for a few lines).
    """

    # Passes of pairs made from the text (create_pretraining_data's default dupe_factor).
    PAIRING_PASSES = 10

    def __init__(self, options, max_seq_length, max_predictions_per_seq, tokenizer="auto"):
        """Raises VocabError (a ValueError) for a vocab file that cannot be read or lacks a
        token the input needs, before run_pretraining creates its output_dir."""
        from vocab import tokenization
        self.options, self.tokenizer = options, tokenizer
        self.max_seq_length, self.max_predictions = max_seq_length, max_predictions_per_seq
        self.vocab = tokenization.load_vocab(options.vocab_file)
        tokenization.check_vocab(self.vocab, options.vocab_file, self.required_tokens)
        self.documents = None
        # {(seed, next_sentence): the pairs a packed row holds}, as `dataset` packed them.
        self._pairs_per_row = {}

    @property
    def required_tokens(self):
        """The tokens the masks and pairs are made of ([UNK] too for the text's word-pieces)."""
        return (("[UNK]",) if self.reads_text else ()) + ("[CLS]", "[SEP]", "[MASK]")

    @property
    def reads_text(self):
        return self.options.input_format == "text"

    def read_text(self, files, next_sentence):
        """Reads and tokenizes the text `files` (once); returns next sentence prediction (on
        unless the flag said false). Raises InputError for text without any sentence."""
        from bert_tasks.pretraining.data.documents import LineTokenizer, build_documents
        from bert_tasks.pretraining.data.reading import InputError, describe_files, iter_line_blocks
        o = self.options
        tokenizer = LineTokenizer(o.vocab_file, o.do_lower_case, self.tokenizer)
        documents, num_lines = build_documents(iter_line_blocks(files), tokenizer)
        self.documents = [d for d in documents if d]
        if not self.documents:
            raise InputError("--input_format=text: input file(s) %s: none of the %d lines has "
                             "word-pieces" % (describe_files(files), num_lines))
        logging.info("Dynamic masking from text: %d documents, %d sentences; %.0f%% of tokens "
                     "chosen (%.0f%% [MASK], %.0f%% random, %.0f%% kept)%s; pairs and masks "
                     "made anew each pass", len(self.documents),
                     sum(map(len, self.documents)), 100 * o.masked_lm_prob,
                     100 * o.mask_token_prob, 100 * o.random_token_prob,
                     100 * (1 - o.mask_token_prob - o.random_token_prob),
                     ", whole words" if o.do_whole_word_mask else "")
        return next_sentence is not False

    def _text_pairs(self, seed, next_sentence):
        """The `TextPairs` of the text (`read_text` first) for `seed`, packed with
        --max_sequences_per_row."""
        pairs = TextPairs(self.documents, self.vocab, self.max_seq_length,
                          self.options.short_seq_prob, next_sentence, seed)
        if self.options.max_sequences_per_row > 1:
            pairs.pack(self.options.max_sequences_per_row, self.max_predictions,
                       self.options.masked_lm_prob)
        return pairs

    def pairs_per_row(self, seed, next_sentence):
        """The pairs a row of `dataset`'s batches for `seed` holds on average: 1.0 but for
        text packed in the pipeline (--max_sequences_per_row), where the packing of those
        pairs counts them. The pairs are made once: a `dataset` made for `seed` already
        counted them; else they are made here (`read_text` first)."""
        if not (self.reads_text and self.options.max_sequences_per_row > 1):
            return 1.0
        if (seed, next_sentence) not in self._pairs_per_row:
            pairs = self._text_pairs(seed, next_sentence)
            pairs.arrays(self.PAIRING_PASSES)
            self._pairs_per_row[seed, next_sentence] = pairs.pairs_per_row
        return self._pairs_per_row[seed, next_sentence]

    def masker(self):
        o = self.options
        return Masker(self.vocab, self.max_predictions, o.masked_lm_prob, o.do_whole_word_mask,
                      MaskingRates(o.mask_token_prob, o.random_token_prob))

    def dataset(self, files, batch_size, next_sentence, is_training=True, input_context=None,
                seed=None, drop_remainder=True, repeat=None):
        """Masked batches of the text (`read_text` first) or of unmasked records `files`."""
        seed = self.options.random_seed if seed is None else seed
        if self.reads_text:
            pairs = self._text_pairs(seed, next_sentence)
            dataset = text_dataset(pairs, self.masker(), batch_size, seed, self.PAIRING_PASSES,
                                   repeat is not False, input_context)
            self._pairs_per_row[seed, next_sentence] = pairs.pairs_per_row
            return dataset
        from bert_runner import inputs
        from bert_tasks.pretraining.data.features import name_to_features
        spec = {name: feature for name, feature in name_to_features(
            self.max_seq_length, self.max_predictions, next_sentence).items()
            if not name.startswith("masked_lm")}
        batches = inputs.tfrecord_dataset(
            files, spec, batch_size, is_training=is_training, input_context=input_context,
            seed=seed, drop_remainder=drop_remainder, repeat=repeat)
        shard = input_context.input_pipeline_id if input_context else 0
        return masked_dataset(batches, self.masker(), seed * 1000003 + shard)
