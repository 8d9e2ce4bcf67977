"""ELECTRA's masks for records that carry none: the original google-research/electra's rule, in
`tf.data`.

The original's `build_pretraining_dataset.py` writes records of `input_ids`, `input_mask` and
`segment_ids` alone (int64, `max_seq_length` each: [CLS] A [SEP] (B [SEP]), 0-padded); its
`run_pretraining.py` masks every batch inside the model (`pretrain_helpers.mask`). Here the same
rule is a map on each batch (`ElectraMasker`), with stateless random ops seeded by the run's seed
and the batch number (`dynamic_masking.masked_dataset`), so the model gets the features of
create_pretraining_data's records (`masked_lm_positions`, `masked_lm_ids` int32 and
`masked_lm_weights` float32, `[B, N]`):

* N (`max_predictions_per_seq`) = `max_predictions(mask_prob, max_seq_length)` =
  int((mask_prob + 0.005) * max_seq_length), configure_pretraining.py's (19 at 0.15 and 128),
  unless `--max_predictions_per_seq` is given;
* candidates: the real tokens (input_mask 1) but [CLS], [SEP] and [MASK];
* per row, num_to_predict = max(1, min(N, round(num_tokens * mask_prob))), num_tokens =
  sum(input_mask) ([CLS] and [SEP] counted), in float32 rounding half to even, as the
  original (190 tokens at 0.15 give 29; float64 would give 28);
* N positions drawn uniformly from the candidates with replacement (`tf.random.categorical`);
  the first num_to_predict slots weigh 1, the others point at position 0 with id 0 and weight
  0. A position drawn twice is predicted twice, both slots weighted, as there;
* masked_lm_ids: the tokens at the positions;
* a slot puts [MASK] at its position where a uniform draw is < 0.85, else leaves the token as
  it is (no random word-piece). A position drawn into slots of both kinds becomes [MASK];
  position 0 is never written (the original's `scatter_update` ignores it).

The draws are TensorFlow's stateless ones, not the original's `tf.random` stream: the masks
follow the same distribution, not the same draws (tests/test_electra_masking.py). A row
without candidates (build_pretraining_dataset.py writes none) gets no weighted slot, where the
original would draw from the NaN logits of 0 / 0. Packed rows (`data.packing`'s schema; no tool
writes them without masks) are masked as one sequence of the row's tokens.
"""
import dataclasses

# configure_pretraining.PretrainingConfig.mask_prob: the share of the tokens predicted.
MASK_PROB = 0.15
# pretrain_helpers.mask: a predicted position becomes [MASK] where uniform < 0.85, else stays.
MASK_TOKEN_SHARE = 0.85
# The tokens never masked (pretrain_helpers.get_candidates_mask), besides padding.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]")


def max_predictions(mask_prob, max_seq_length):
    """configure_pretraining.py's max_predictions_per_seq: int((mask_prob + 0.005) *
    max_seq_length) (19 at 0.15 and 128, 79 at 0.15 and 512)."""
    return int((mask_prob + 0.005) * max_seq_length)


class ElectraMasker(object):
    """The original's `pretrain_helpers.mask` of a batch, in TensorFlow (see the module doc).

    Args:
      vocab: token -> id (its [CLS], [SEP] and [MASK]); ValueError naming `vocab_name` if it
        lacks one.
      max_predictions_per_seq: N, the slots a row has.
      mask_prob: the share of each row's tokens predicted.
    Call: `masker(features, seed)`: features `{input_ids, input_mask, ...}` int `[B, S]`, seed
      int `[2]` -> the same dict with input_ids masked (same dtype) and masked_lm_positions,
      masked_lm_ids int32 `[B, N]`, masked_lm_weights float32 `[B, N]` added; static shapes
      where the batch's are.
    """

    def __init__(self, vocab, max_predictions_per_seq, mask_prob=MASK_PROB, vocab_name="vocab"):
        missing = [token for token in SPECIAL_TOKENS if token not in vocab]
        if missing:
            raise ValueError(f"{vocab_name} has no {', '.join(missing)}: ELECTRA's masks of "
                             "records without masks are drawn with its [CLS], [SEP] and [MASK] "
                             "ids")
        self.cls_id, self.sep_id, self.mask_id = (vocab[token] for token in SPECIAL_TOKENS)
        self.max_predictions = max_predictions_per_seq
        self.mask_prob = mask_prob

    def __call__(self, features, seed):
        import tensorflow as tf
        ids = features["input_ids"]
        real = features["input_mask"] > 0
        candidate = real & (ids != self.cls_id) & (ids != self.sep_id) & (ids != self.mask_id)
        n = self.max_predictions
        # float32 as the original, whose rounding of .5 cases differs from float64's.
        num_tokens = tf.reduce_sum(tf.cast(real, tf.float32), axis=1)
        num_to_predict = tf.maximum(1, tf.minimum(n, tf.cast(
            tf.round(num_tokens * tf.constant(self.mask_prob, tf.float32)), tf.int32)))
        has_candidate = tf.reduce_any(candidate, axis=1)
        weights = tf.sequence_mask(num_to_predict, n) & has_candidate[:, None]   # [B, N]
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2)
        # Uniform over the candidates (the original's log(candidates / count)); a row without
        # any draws from all its positions, its slots then unweighted.
        logits = tf.where(candidate | ~has_candidate[:, None], 0.0, float("-inf"))
        positions = tf.random.stateless_categorical(logits, n, seeds[0], dtype=tf.int32)
        positions = tf.where(weights, positions, 0)
        labels = tf.where(weights, tf.gather(ids, positions, batch_dims=1), 0)
        masked = (weights & (positions > 0)
                  & (tf.random.stateless_uniform(tf.shape(positions), seeds[1])
                     < MASK_TOKEN_SHARE))
        # A position in several slots is [MASK] if any of them masks it (the original's
        # scatter_update writes it once); -1 one-hot encodes to no position.
        hit = tf.reduce_any(tf.one_hot(tf.where(masked, positions, -1), tf.shape(ids)[1],
                                       on_value=True, off_value=False, dtype=tf.bool), axis=1)
        out = dict(features)
        out["input_ids"] = tf.where(hit, tf.cast(self.mask_id, ids.dtype), ids)
        out["masked_lm_positions"] = positions
        out["masked_lm_ids"] = tf.cast(labels, tf.int32)
        out["masked_lm_weights"] = tf.cast(weights, tf.float32)
        return out


@dataclasses.dataclass(frozen=True)
class ElectraMasking(object):
    """How ELECTRA masks records without masks (run_pretraining.py's flags).

    Attributes:
      vocab_file: the vocabulary whose [CLS], [SEP] and [MASK] ids the records hold.
      mask_prob: the share of the tokens predicted (`--masked_lm_prob`).
      max_predictions_per_seq: N when `--max_predictions_per_seq` is given; None: the
        original's rule (`max_predictions`).
    """
    vocab_file: str = None
    mask_prob: float = MASK_PROB
    max_predictions_per_seq: int = None

    def slots(self, max_seq_length):
        """N: the flag's value, else the original's rule."""
        if self.max_predictions_per_seq is not None:
            return self.max_predictions_per_seq
        return max_predictions(self.mask_prob, max_seq_length)

    def masker(self, max_seq_length, input_file):
        """The `ElectraMasker` of records of `max_seq_length` (read from `--input_file`, which
        refusals name). Raises ValueError without `vocab_file`, or when it lacks a token."""
        if not self.vocab_file:
            raise ValueError(f"--input_file={input_file}: records without masks (the original "
                             "ELECTRA's) need --vocab_file: the masks are drawn with its [CLS], "
                             "[SEP] and [MASK] ids")
        from vocab import tokenization
        return ElectraMasker(tokenization.load_vocab(self.vocab_file), self.slots(max_seq_length),
                             self.mask_prob, f"--vocab_file={self.vocab_file}")


def masked_records(files, feature_spec, masker, batch_size, is_training=True, input_context=None,
                   seed=None, drop_remainder=True, repeat=None):
    """Batches of the records `files` (parsed with `feature_spec`, which holds no masked_lm_*),
    each masked by `masker`: batch k of input pipeline i with the stateless seed
    (seed * 1000003 + i, k), as dynamic masking's, so every epoch gets new masks and a run is
    reproducible. The other arguments are `inputs.tfrecord_dataset`'s; with `drop_remainder`
    every batch has the static shape `[batch_size, ...]` (XLA)."""
    from bert_runner import inputs
    from bert_tasks.pretraining.data.dynamic_masking import masked_dataset
    seed = 0 if seed is None else seed
    batches = inputs.tfrecord_dataset(
        files, feature_spec, batch_size, is_training=is_training, input_context=input_context,
        seed=seed, drop_remainder=drop_remainder, repeat=repeat)
    shard = input_context.input_pipeline_id if input_context else 0
    return masked_dataset(batches, masker, seed * 1000003 + shard)
