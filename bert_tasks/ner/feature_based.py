"""The BERT paper's Table 7: CoNLL-2003 NER with frozen BERT features, one row per layer choice.

For each choice the BiLSTM tagger (`bert_tasks.ner.lstm_tagger`) is trained on the cached train activations
(`bert_tasks.ner.activations`) and scored on dev with conlleval's entity F1:

    rows = [train_and_score(choice, train_cache, dev_cache, dev_sentences, label_list, settings)
            for choice in FEATURE_CHOICES]
    print(format_table(rows, baseline_f1))
"""
import dataclasses
import math
import time

import keras
import numpy as np
from absl import logging

from bert_tasks.ner import conlleval
from bert_tasks.ner.lstm_tagger import BiLstmTagger


@dataclasses.dataclass(frozen=True)
class FeatureChoice:
    """One row of Table 7.

    Attributes:
      key: the command-line name.
      title: the paper's row name.
      combination: how the layers are combined (`bert_tasks.ner.lstm_tagger.COMBINATIONS`).
      first, last: the layers fed in, counted from the top for values <= 0 (0 = last hidden
        layer, -1 = second-to-last, ...) and from the bottom otherwise (1 = first encoder
        layer); `None` for the embedding output.
      paper_dev_f1: the paper's BERT-Base dev F1.
    """
    key: str
    title: str
    combination: str
    first: object
    last: object
    paper_dev_f1: float

    def for_model(self, num_hidden_layers):
        """This choice for a model of `num_hidden_layers` encoder layers: its title names how
        many it sums where it takes them all (BERT-Base's 12 in the paper). ValueError where the
        model is too shallow for it."""
        self.layers(num_hidden_layers)
        return dataclasses.replace(self, title=self.title.format(layers=num_hidden_layers))

    def layers(self, num_hidden_layers):
        """Indexes into the activation cache (0 = embeddings, k = encoder layer k)."""
        if self.first is None:
            return [0]

        def index(k):
            return num_hidden_layers + k if k <= 0 else k

        first, last = index(self.first), index(self.last)
        if first < 1:
            raise ValueError("%s needs at least %d encoder layers; the model has %d"
                             % (self.title, 1 - self.first, num_hidden_layers))
        return list(range(first, last + 1))


FEATURE_CHOICES = (
    FeatureChoice("embeddings", "Embeddings", "single", None, None, 91.0),
    FeatureChoice("second_to_last", "Second-to-Last Hidden", "single", -1, -1, 95.6),
    FeatureChoice("last", "Last Hidden", "single", 0, 0, 94.9),
    FeatureChoice("weighted_sum_last_four", "Weighted Sum Last Four Hidden", "weighted_sum",
                  -3, 0, 95.9),
    FeatureChoice("concat_last_four", "Concat Last Four Hidden", "concat", -3, 0, 96.1),
    FeatureChoice("weighted_sum_all", "Weighted Sum All {layers} Layers", "weighted_sum", 1, 0,
                  95.5),
)
CHOICES_BY_KEY = {choice.key: choice for choice in FEATURE_CHOICES}
# The paper's fine-tuned BERT-Base, the row above the feature-based ones in Table 7.
PAPER_FINE_TUNED_DEV_F1 = 96.4


class SentenceBatches:
    """Batches of whole sentences read from an `ActivationCache`.

    Each batch is ({"activations": float32 [B, T, K, H], "word_mask": int32 [B, T]}, labels
    int32 [B, T], weights float32 [B, T]) with T the batch's longest sentence rounded up to a
    power of two, at least 16: batches are not padded to the longest sentence of the file, and
    the compiled step sees few distinct shapes (16, 32, 64, 128 on CoNLL-2003). Training batches
    are reshuffled every epoch (`on_epoch_end`); otherwise they are in file order.
    """

    def __init__(self, cache, layer_indexes, batch_size, shuffle_seed=None):
        self.cache = cache
        self.layers = cache.layers(layer_indexes)
        self.batch_size = batch_size
        self.order = np.arange(cache.num_sentences)
        self.rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
        if self.rng is not None:
            self.rng.shuffle(self.order)

    def __len__(self):
        return math.ceil(self.cache.num_sentences / self.batch_size)

    def on_epoch_end(self):
        if self.rng is not None:
            self.rng.shuffle(self.order)

    def __getitem__(self, index):
        sentences = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        starts = self.cache.sentence_starts
        lengths = starts[sentences + 1] - starts[sentences]
        steps = max(16, 1 << (int(lengths.max()) - 1).bit_length())
        hidden = self.layers[0].shape[1]
        activations = np.zeros((len(sentences), steps, len(self.layers), hidden), np.float32)
        labels = np.zeros((len(sentences), steps), np.int32)
        mask = np.zeros((len(sentences), steps), np.int32)
        for i, (s, n) in enumerate(zip(sentences, lengths)):
            rows = slice(starts[s], starts[s] + n)
            for k, layer in enumerate(self.layers):
                activations[i, :n, k] = layer[rows]
            labels[i, :n] = self.cache.label_ids[rows]
            mask[i, :n] = 1
        return ({"activations": activations, "word_mask": mask}, labels,
                mask.astype(np.float32))


@dataclasses.dataclass(frozen=True)
class TaggerSettings:
    """Training settings shared by the rows: LSTM units per direction, epochs, batch size (in
    sentences), Adam learning rate, seed."""
    lstm_units: int
    num_train_epochs: int
    batch_size: int
    learning_rate: float
    seed: int


@dataclasses.dataclass
class TableRow:
    """One trained row: its choice and the dev F1 (conlleval, percent)."""
    choice: FeatureChoice
    dev_f1: float


def predicted_tags(model, batches, label_list):
    """The argmax tag of every word, per sentence, in file order."""
    starts = batches.cache.sentence_starts
    tags = []
    for index in range(len(batches)):
        inputs, _, _ = batches[index]
        ids = np.argmax(np.asarray(model.predict_on_batch(inputs)), axis=-1)
        sentences = batches.order[index * batches.batch_size:(index + 1) * batches.batch_size]
        for row, s in zip(ids, sentences):
            tags.append([label_list[i] for i in row[:starts[s + 1] - starts[s]]])
    return tags


def _fit(model, batches, num_epochs):
    """Trains batch by batch (Keras `fit` would fix T to the first batch's); logs each epoch."""
    for epoch in range(num_epochs):
        start = time.perf_counter()
        losses = [float(model.train_on_batch(*batches[i])) for i in range(len(batches))]
        batches.on_epoch_end()
        logging.info("  epoch %d of %d: loss %.4f (%.1f s)", epoch + 1, num_epochs,
                     np.mean(losses), time.perf_counter() - start)


def train_and_score(choice, train_cache, dev_cache, dev_gold_tags, label_list, settings):
    """Trains a fresh tagger on `choice`'s layers, scores dev with conlleval; returns a TableRow."""
    start = time.perf_counter()
    layers = choice.layers(train_cache.settings["num_hidden_layers"])
    logging.info("Table 7 row %r: layers %s, %s", choice.title, layers, choice.combination)
    keras.utils.set_random_seed(settings.seed)
    model = BiLstmTagger(len(layers), choice.combination, settings.lstm_units, len(label_list))
    model.compile(optimizer=keras.optimizers.Adam(settings.learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  # Not XLA: compiling the LSTM loops costs more than it saves at these sizes.
                  jit_compile=False)
    train = SentenceBatches(train_cache, layers, settings.batch_size, shuffle_seed=settings.seed)
    # Built before the first step: TensorFlow traces a step that creates variables twice.
    model(train[0][0])
    model.optimizer.build(model.trainable_variables)
    _fit(model, train, settings.num_train_epochs)
    dev = SentenceBatches(dev_cache, layers, settings.batch_size)
    counts = conlleval.count_sequences(dev_gold_tags, predicted_tags(model, dev, label_list))
    f1 = conlleval.metrics(counts)["overall"]["f1"]
    logging.info("Table 7 row %r: dev F1 %.2f (%.0f s)", choice.title, f1,
                 time.perf_counter() - start)
    return TableRow(choice, f1)


def majority_baseline_f1(gold_tags):
    """conlleval F1 of tagging every word O, the majority tag: 0, as no entity is found."""
    predicted = [["O"] * len(tags) for tags in gold_tags]
    return conlleval.metrics(conlleval.count_sequences(gold_tags, predicted))["overall"]["f1"]


def format_table(rows, baseline_f1):
    """Table 7's layout: one row per choice, our dev F1 beside the paper's BERT-Base figure."""
    fine_tuned = "Fine-tuning approach (run_ner.py)"
    baseline = "Majority baseline (every word O)"
    width = max(len(name) for name in [fine_tuned, baseline] + [r.choice.title for r in rows])
    lines = ["Feature-based NER (CoNLL-2003 dev F1, conlleval)",
             "%-*s %8s %8s" % (width, "Layers", "ours", "paper"),
             "%-*s %8s %8.1f" % (width, fine_tuned, "-", PAPER_FINE_TUNED_DEV_F1)]
    for row in rows:
        lines.append("%-*s %8.2f %8.1f" % (width, row.choice.title, row.dev_f1,
                                           row.choice.paper_dev_f1))
    lines.append("%-*s %8.2f %8s" % (width, baseline, baseline_f1, "-"))
    return "\n".join(lines) + "\n"
