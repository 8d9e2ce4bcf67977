"""Sentence embeddings as a `bert_runner.task.Task`: pairs files in, the encoder trained with
in-batch negatives (`modeling.bert.sentence_encoder`), retrieval metrics out.

Training records hold K = 2 + hard negatives texts per pair (query, positive, negatives), each
`[CLS] text [SEP]` padded to max_seq_length; the loss scores each query against every positive
and hard negative of the global batch (under a distribution strategy the other replicas' are
gathered, so a batch of 256 on 8 devices has 255 in-batch negatives, as on one).

Evaluation is retrieval: the queries of --eval_file against a corpus of every distinct passage of
it (positives and hard negatives) and of --corpus_file; a query's relevant passages are its
positives (a query on several lines has several). The records hold one text each, queries first;
the metrics (`bert_tasks.ranking`) are printed beside a random order's and the starting model's.
"""
import collections
import os
import random
import shutil

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from bert_runner.tfrecords import int_feature
from bert_runner.startup import check_pooling
from bert_runner.task import SplitRecords, Task, encoder_training_flops
from bert_tasks import ranking
from bert_tasks.embeddings.pairs import read_corpus, read_pairs
from modeling import families
from modeling.checkpoint import write_hugging_face
from modeling.bert.sentence_encoder import in_batch_negatives_loss, same_texts, text_hashes
from vocab.packing import pack_pair, pad_inputs

# The input pipeline shuffles within 100 records: pairs are written in an order shuffled once.
_SHUFFLE_SEED = 12345
SENTENCE_TRANSFORMERS_DIR = "sentence_transformers"
METRICS = ("recall_at_1", "recall_at_10", "mrr_at_10", "ndcg_at_10")


class SentenceEmbeddingTask(Task):
    """Args:
      max_seq_length: the records' sequence length (every text is truncated to it).
      train_file, eval_file: pairs files (`bert_tasks.embeddings.pairs`).
      corpus_file: more passages for the retrieval evaluation, one a line (or None).
      pooling, normalize: the vector (`modeling.layers.pooling.pool`).
      scale: the cosine similarities' multiplier in the loss; symmetric: the loss both ways.
      train_batch_size, accumulation: the training batch (all replicas together) and the
        micro-batches it is split into: each micro-batch is one softmax's in-batch negatives.
    """

    name = "sentence_embeddings"
    splits = {"train": "train", "eval": "eval"}
    # The driver evaluates the starting model too, and prints its figures beside the trained one's.
    compare_with_start = True

    def __init__(self, max_seq_length, train_file=None, eval_file=None, corpus_file=None,
                 pooling="mean", normalize=True, scale=20.0, symmetric=False,
                 train_batch_size=32, accumulation=1):
        self.max_seq_length = max_seq_length
        self.files = {"train": train_file, "eval": eval_file}
        self.corpus_file = corpus_file
        self.pooling = pooling
        self.normalize = normalize
        self.scale = scale
        self.symmetric = symmetric
        self.train_batch_size = train_batch_size
        self.accumulation = accumulation
        self.texts_per_pair = None

    def read_examples(self, split, run=None, labels=None):
        path = self.files[split]
        if not path:
            flag = {"train": "train_file", "eval": "eval_file"}[split]
            raise ValueError(f"--do_{split} needs --{flag}: the pairs to "
                             f"{'train on' if split == 'train' else 'evaluate retrieval on'}")
        if split == "train":
            pairs = read_pairs(path)
            random.Random(_SHUFFLE_SEED).shuffle(pairs)
            return pairs
        pairs = read_pairs(path, same_negatives=False)
        corpus = read_corpus(self.corpus_file) if self.corpus_file else []
        return retrieval_set(pairs, corpus)

    def settle(self, examples, run, config=None, labels=None):
        """With a training split: its batches checked, and the texts a pair holds (query,
        positive, its negatives), which shape its records, settled."""
        if "train" not in examples:
            return self
        pairs = examples["train"]
        texts_per_pair = 2 + len(pairs[0].negatives)
        check_batch(pairs, self.files["train"], self.train_batch_size, self.accumulation)
        return self._settled(texts_per_pair=texts_per_pair)

    def recorded_settings(self):
        return {"pooling": self.pooling, "normalize": self.normalize,
                "similarity_scale": self.scale, "symmetric_loss": self.symmetric}

    def _ids(self, text, tokenizer):
        tokens, segment_ids = pack_pair(tokenizer.tokenize(text), None, self.max_seq_length)
        return pad_inputs(tokenizer.convert_tokens_to_ids(tokens), segment_ids,
                          self.max_seq_length)

    def records(self, examples, split, tokenizer, run):
        """The training pairs' records (a pair's texts in one record), or the evaluation set's
        texts, queries first; evaluation reads the set itself (`Split.examples`)."""
        return SplitRecords(self._records(examples, split, tokenizer))

    def _records(self, examples, split, tokenizer):
        if split == "train":
            for pair in examples:
                texts = [self._ids(t, tokenizer) for t in (pair.query, pair.positive, *pair.negatives)]
                yield _example({name: sum((list(t[i]) for t in texts), [])
                                for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))})
            return
        queries, passages, _ = examples
        for text in queries + passages:
            ids, mask, segments = self._ids(text, tokenizer)
            yield _example({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                            "is_real_example": [1]})

    def padding_record(self):
        zeros = [0] * self.max_seq_length
        return _example({"input_ids": zeros, "input_mask": zeros, "segment_ids": zeros,
                         "is_real_example": [0]})

    def model_config(self, config):
        check_pooling(self.pooling, config)  # a left-to-right model has no [CLS] vector
        return config

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return families.build_model("sentence_encoder", config, self.pooling, self.normalize,
                                    bilstm_on_top=bilstm_on_top, modes=modes)

    def feature_spec(self, is_training):
        length = self.max_seq_length
        if is_training:
            shape = [self.texts_per_pair, length]
            return {name: tf.io.FixedLenFeature(shape, tf.int64)
                    for name in ("input_ids", "input_mask", "segment_ids")}
        return {"input_ids": tf.io.FixedLenFeature([length], tf.int64),
                "input_mask": tf.io.FixedLenFeature([length], tf.int64),
                "segment_ids": tf.io.FixedLenFeature([length], tf.int64),
                "is_real_example": tf.io.FixedLenFeature([], tf.int64)}

    def loss(self, model, features, training):
        vectors = model(features, training=training)["embeddings"]  # [B, K, H]
        queries, positives = vectors[:, 0], vectors[:, 1]
        negatives = None
        if features["input_ids"].shape[1] > 2:  # K texts a pair: hard negatives after two
            negatives = ops.reshape(vectors[:, 2:], (-1, ops.shape(vectors)[-1]))
        ids = features["input_ids"]
        query_hashes, positive_hashes = text_hashes(ids[:, 0]), text_hashes(ids[:, 1])
        first, all_queries = 0, queries
        all_query_hashes, all_positive_hashes = query_hashes, positive_hashes
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            # Every replica's positives and negatives are this replica's queries' negatives too.
            first = context.replica_id_in_sync_group * tf.shape(queries)[0]
            positives, all_queries = context.all_gather([positives, queries], axis=0)
            # Apart: int32 tensors live on the host, and one gather takes one kind of device.
            all_query_hashes, all_positive_hashes = context.all_gather(
                [query_hashes, positive_hashes], axis=0)
            if negatives is not None:
                negatives = context.all_gather(negatives, axis=0)
        # A pair met twice in a batch (the data repeats, then shuffles), a passage of two
        # queries, a query of two passages: no negatives of each other.
        matches = ops.logical_or(same_texts(positive_hashes, all_positive_hashes),
                                 same_texts(query_hashes, all_query_hashes))
        loss, _ = in_batch_negatives_loss(
            queries, positives, negatives, self.scale, self.symmetric, first=first,
            all_queries=all_queries, matches=matches)
        return loss, {}

    def predict_step(self, model, features):
        return {"embeddings": model(features, training=False)["embeddings"],
                "is_real_example": features["is_real_example"]}

    def evaluate(self, outputs, global_step, split, output_dir):
        vectors = outputs["embeddings"][outputs["is_real_example"].astype(bool)]
        num_queries, relevant = _retrieval(split)
        metrics = ranking.ranking_metrics(_cosine(vectors[:num_queries], vectors[num_queries:]),
                                          relevant)
        return {"global_step": np.int64(global_step),
                **{name: np.float32(metrics[name]) for name in METRICS}}

    def baselines(self, outputs, split):
        num_queries, relevant = _retrieval(split)
        passages = int(outputs["is_real_example"].sum()) - num_queries
        chance = ranking.chance_metrics(passages, [len(r) for r in relevant])
        return {name: "random order %.4f (%d queries, %d passages)"
                % (chance[name], num_queries, passages) for name in METRICS}

    def finish(self, result, output_dir):
        """After training: the encoder as a sentence-transformers directory,
        output_dir/sentence_transformers (replacing an earlier run's)."""
        if not (result.run.do_train and result.trainer.chief):
            return
        path = os.path.join(output_dir, SENTENCE_TRANSFORMERS_DIR)
        new, old = path + ".new", path + ".old"
        for leftover in (new, old):
            shutil.rmtree(leftover, ignore_errors=True)
        # A LoRA run's adapters merged into the kernels.
        write_hugging_face(result.trainer.model, new, result.run.vocab_file,
                           result.run.do_lower_case,
                           (self.pooling, self.normalize, self.max_seq_length))
        if os.path.exists(path):
            os.replace(path, old)
        os.replace(new, path)
        shutil.rmtree(old, ignore_errors=True)
        logging.info("Wrote the trained encoder for sentence-transformers (and transformers) to "
                     "%s", path)

    def flops_per_example(self, config):
        if self.texts_per_pair is None:  # no training split: nothing is trained
            return None
        return self.texts_per_pair * encoder_training_flops(config, self.max_seq_length)

    def tokens_per_example(self):
        return self.texts_per_pair and self.texts_per_pair * self.max_seq_length


def check_batch(pairs, path, batch_size, accumulation=1):
    """Refuses a training batch that cannot train as in-batch negatives: more pairs than the file
    holds (a batch would hold a pair twice, its positive among its own query's negatives), or,
    without hard negatives, micro-batches of one pair (its positive alone: the softmax is 1, the
    loss 0, and nothing is learnt)."""
    if batch_size > len(pairs):
        raise ValueError(
            f"--train_batch_size={batch_size} is more than the {len(pairs)} pairs of "
            f"--train_file={path}: a batch would hold a pair twice, its query's own positive "
            f"among its negatives; give --train_batch_size={len(pairs)} or less")
    if not pairs[0].negatives and batch_size // accumulation < 2:
        split = (f" with --gradient_accumulation_steps={accumulation} (micro-batches of "
                 f"{batch_size // accumulation} pair)" if accumulation > 1 else "")
        raise ValueError(
            f"--train_batch_size={batch_size}{split} trains nothing: without hard negatives in "
            f"--train_file={path}, a query's negatives are the other pairs of its batch, so a "
            "batch needs at least 2 pairs")


def retrieval_set(pairs, corpus=()):
    """(queries, passages, relevant) of an evaluation file: distinct query texts in order of first
    appearance; distinct passages (positives, hard negatives, then `corpus`) in order; for each
    query the sorted indices of its positives among the passages."""
    queries, passages = {}, {}
    positives = collections.defaultdict(set)
    for pair in pairs:
        q = queries.setdefault(pair.query, len(queries))
        positives[q].add(passages.setdefault(pair.positive, len(passages)))
        for negative in pair.negatives:
            passages.setdefault(negative, len(passages))
    for text in corpus:
        passages.setdefault(text, len(passages))
    return list(queries), list(passages), [sorted(positives[q]) for q in range(len(queries))]


def _retrieval(split):
    """(number of queries, [relevant passage indices per query]) of the evaluation `Split`, whose
    records hold the queries first (`retrieval_set`)."""
    queries, _, relevant = split.examples
    return len(queries), relevant


def _cosine(a, b):
    a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return a @ b.T


def _example(values):
    return tf.train.Example(features=tf.train.Features(
        feature={name: int_feature(v) for name, v in values.items()}))
