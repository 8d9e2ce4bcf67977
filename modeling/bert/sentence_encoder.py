"""`BertSentenceEncoder`: the encoder giving one vector per text (sentence embeddings), trained
with in-batch negatives (`in_batch_negatives_loss`; run_sentence_embeddings.py).

There is no head: the vector is the encoder's last layer pooled (`modeling.layers.pooling.pool`:
"cls", "mean" or "max", optionally L2-normalised), so the checkpoint holds the encoder's variables
alone, under the names every other model's encoder has, and any script loads it as an encoder
(extract_features.py --pooling, export_model.py --format=embedding).
"""
from keras import ops

from modeling.layers.pooling import POOLING_METHODS, pool
from modeling.bert.task_models import BertTaskModel

_TEXT_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_type_ids")


class BertSentenceEncoder(BertTaskModel):
    """Encoder + pooling.

    Inputs: `input_ids`, `input_mask`, `segment_ids` int `[B, S]` or `[B, K, S]` (K texts per
    example: a query, its positive and its hard negatives).
    Returns: `embeddings` float32 `[B, H]` or `[B, K, H]`.
    """

    def __init__(self, config, pooling="mean", normalize=False, name="bert_sentence_encoder",
                 **kwargs):
        super().__init__(config, name, **kwargs)
        if pooling not in POOLING_METHODS:
            raise ValueError(f"pooling {pooling!r} is not one of {', '.join(POOLING_METHODS)}")
        self.pooling = pooling
        self.normalize = normalize

    def call(self, features, training=False):
        ids = features["input_ids"]
        texts = {name: ops.reshape(value, (-1, ops.shape(value)[-1]))
                 for name, value in features.items() if name in _TEXT_FEATURES}
        sequence = self.encode(texts, training=training, skip_padding=True)["sequence_output"]
        vectors = pool(sequence, texts["input_mask"], self.pooling, self.normalize)
        if len(ids.shape) == 3:
            vectors = ops.reshape(vectors, (-1, ops.shape(ids)[1], ops.shape(vectors)[-1]))
        return {"embeddings": vectors}

    def get_config(self):
        return {**self._config_dict(), "pooling": self.pooling, "normalize": self.normalize}

    def tf1_head_variables(self):
        return []


def in_batch_negatives_loss(queries, positives, negatives=None, scale=20.0, symmetric=False,
                            first=0, all_queries=None, matches=None):
    """The softmax cross-entropy of each query against every candidate of the batch, by scaled
    cosine similarity (sentence-transformers' MultipleNegativesRankingLoss; van den Oord et al.'s
    InfoNCE): query i's positive is positive `first + i`; every other positive (the other
    queries') and every hard negative is a negative.

    Under a distribution strategy `positives`, `negatives` and `all_queries` are every replica's
    (gathered), `queries` this replica's, which are rows `first .. first + Q` of the gathered.

    Args:
      queries: float `[Q, H]`.
      positives: float `[P, H]`, P >= Q.
      negatives: float `[N, H]` (hard negatives, any count) or None.
      scale: the inverse temperature multiplying the cosine similarities (20: sentence-transformers').
      symmetric: also the loss of each positive choosing its query among all queries
        (MultipleNegativesSymmetricRankingLoss); the two are averaged.
      first: int (or int tensor), the row of this replica's first query among the gathered.
      all_queries: float `[P, H]`, the gathered queries (symmetric only; default `queries`).
      matches: bool `[Q, P]` or None: True where pair j matches query i's pair (`same_texts`:
        its positive is query i's positive, or its query is query i: a pair met twice in a
        batch, a passage of several queries, a query of several passages). Pair j's positive is
        then no negative of query i, nor (symmetric) query j of query i's positive: each is
        left out of the other's softmax. None: every other pair's texts are negatives.
    Returns:
      (scalar float32 loss, per-query loss float32 `[Q]`).
    """
    q = _unit(queries)
    p = _unit(positives)
    candidates = p if negatives is None else ops.concatenate([p, _unit(negatives)], axis=0)
    labels = first + ops.arange(ops.shape(q)[0])
    per_query = _cross_entropy(
        _without_matches(scale * ops.matmul(q, ops.transpose(candidates)), matches, labels),
        labels)
    if symmetric:
        mine = ops.take(p, labels, axis=0)
        everyone = q if all_queries is None else _unit(all_queries)
        backward = _cross_entropy(_without_matches(
            scale * ops.matmul(mine, ops.transpose(everyone)), matches, labels), labels)
        per_query = (per_query + backward) / 2.0
    return ops.mean(per_query), per_query


# Two fixed odd multipliers: a row's two hashes are its token ids weighted by their positions,
# in wrapping int32 arithmetic (two rows of other tokens share both with odds of about 2^-64).
_HASH_MULTIPLIERS = (-1640531535, 40503)


def text_hashes(ids):
    """int32 `[N, 2]`: two hashes of each row of token ids `ids` (int `[N, S]`), by which
    `same_texts` compares rows (and replicas exchange them instead of the rows)."""
    positions = ops.arange(1, ops.shape(ids)[-1] + 1, dtype="int32")
    return ops.stack([ops.sum(ops.cast(ids, "int32") * (positions * m + 1), axis=-1)
                      for m in _HASH_MULTIPLIERS], axis=-1)


def same_texts(hashes, all_hashes):
    """bool `[Q, P]`: whether row i of the texts hashed `hashes` (`text_hashes`, `[Q, 2]`) holds
    the same tokens as row j of `all_hashes` (`[P, 2]`): `[Q, P]` comparisons, not `[Q, P, S]`."""
    return ops.all(ops.equal(hashes[:, None, :], all_hashes[None, :, :]), axis=-1)


def _without_matches(logits, matches, labels):
    """`logits` `[Q, C]` with the first P candidates that `matches` (`[Q, P]`) marks, other than
    each row's own `labels`, pushed out of its softmax (a logit of -1e9: exp gives 0)."""
    if matches is None:
        return logits
    own = ops.equal(ops.arange(ops.shape(matches)[1])[None, :], labels[:, None])
    others = ops.cast(ops.logical_and(matches, ops.logical_not(own)), logits.dtype)
    others = ops.pad(others, [[0, 0], [0, ops.shape(logits)[1] - ops.shape(matches)[1]]])
    return logits - 1e9 * others


def _unit(x):
    x = ops.cast(x, "float32")
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)), 1e-12)


def _cross_entropy(logits, labels):
    log_probs = ops.log_softmax(logits, axis=-1)
    return -ops.squeeze(ops.take_along_axis(log_probs, labels[:, None], axis=-1), -1)
