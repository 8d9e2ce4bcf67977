"""The encoder with a head attached: pre-training, sequence classification, SQuAD spans.

Each model takes the feature dict its script's TFRecords decode to and returns a dict of logits;
losses are in `modeling.losses`. The encoder is always reachable as `.encoder`. A new head
subclasses `BertTaskModel` and names its variables in the original checkpoint layout with
`tf1_head_variables()`; nothing else needs to know about it to load or save TF1 checkpoints.
"""
import keras

from modeling.bert.encoder import BertModel
from modeling.layers.bilstm import BiLstmOnTop
from modeling.bert.checkpoint_names import dense_names, layer_norm_names, output_layer_names
from modeling.layers.heads import ClassificationHead, MaskedLMHead, NextSentenceHead, SpanHead


def _encoder_inputs(features):
    """Maps a TFRecord feature dict (`segment_ids`) to the encoder's input names; packed rows'
    `sequence_ids` and `position_ids` pass through."""
    return {
        "input_ids": features["input_ids"],
        "input_mask": features.get("input_mask"),
        "token_type_ids": features.get("segment_ids", features.get("token_type_ids")),
        **{name: features[name] for name in ("sequence_ids", "position_ids") if name in features},
    }


class BertTaskModel(keras.Model):
    """Base of the task models: the encoder as `.encoder`, a config, serialisation.

    Subclasses build their head in `__init__` (built there, so variables exist before the first
    call and checkpoints can be loaded at once), implement `call(features, training)` returning a
    dict of float32 tensors, `get_config()`, and `tf1_head_variables()`.

    `kernels` and `modes` are the encoder's (`BertModel`): `"fast"` or `"reference"`, and its
    `EncoderModes` (or their dict); `lora` its adapters (`modeling.layers.lora.LoraSettings`, its
    dict, or None). `bilstm_on_top`: the
    paper's "+ BiLSTM" (`modeling.layers.bilstm.BiLstmOnTop`, as `.bilstm`) between the encoder and
    the head, which then reads its outputs (`encode`); the head's shapes stay the same.
    """

    # The encoder's class: a family's task models differ from BERT's by it (`ElectraModel`).
    encoder_class = BertModel

    def __init__(self, config, name, kernels="fast", modes=None, lora=None, bilstm_on_top=False,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        # Sub-layers follow this model's dtype policy (Keras does not pass it down by itself).
        self.encoder = self.encoder_class(config, kernels=kernels, modes=modes, lora=lora,
                                          dtype=self.dtype_policy)
        self.bilstm = None
        if bilstm_on_top:
            self.bilstm = BiLstmOnTop(self.config.hidden_size, dtype=self.dtype_policy,
                                      name="bilstm")
            self.bilstm.build()

    def encode(self, features, training, skip_padding=False, first_row_apart=False):
        """The encoder's outputs for a TFRecord feature dict; with the BiLSTM on top, its
        per-token outputs as `sequence_output` and its final states as `pooled_output`.
        `first_row_apart`: the caller reads only `pooled_output` (`BertModel`'s; not with the
        BiLSTM, which reads every row)."""
        inputs = _encoder_inputs(features)
        outputs = self.encoder(inputs, training=training, skip_padding=skip_padding,
                               first_row_apart=first_row_apart and self.bilstm is None)
        if self.bilstm is None:
            return outputs
        mask = inputs["input_mask"]
        if mask is None:
            mask = keras.ops.ones_like(inputs["input_ids"])
        sequence, summary = self.bilstm(outputs["sequence_output"], mask, training=training)
        return {**outputs, "sequence_output": sequence, "pooled_output": summary}

    @property
    def config(self):
        return self.encoder.config

    def _config_dict(self):
        return {
            "name": self.name,
            "config": self.config.to_dict(),
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "kernels": self.encoder.kernels,
            "modes": self.encoder.modes.to_dict(),
            "lora": self.encoder.lora and self.encoder.lora.to_dict(),
            "bilstm_on_top": self.bilstm is not None,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def tf1_head_variables(self):
        """`[(original-layout name, variable)]` of the head, in the original's creation order."""
        raise NotImplementedError(f"{type(self).__name__} must name its head's TF1 variables")


class BertPretrainer(BertTaskModel):
    """Encoder + masked-LM + next-sentence heads (run_pretraining's `model_fn`).

    Inputs: `input_ids`, `input_mask`, `segment_ids` int `[B, S]`, `masked_lm_positions` int `[B, P]`;
    packed rows (`bert_runner.packing`) also `sequence_ids`, `position_ids` int
    `[B, S]` and `sequence_starts` int `[B, K]`, each sequence's [CLS] position.
    Returns: `masked_lm_logits` float32 `[B, P, V]`, `next_sentence_logits` float32 `[B, 2]`
    (packed: `[B, K, 2]`, one per sequence).
    `skip_padding`: whether the encoder computes the real tokens' rows only (`BertModel`'s; the
    masked-LM head reads real positions only). Off by default: the original's records fill most
    rows to max_seq_length, and each new row count cost the fused kernels a compilation;
    `bench/packing.py` measures the layouts.
    """

    def __init__(self, config, name="bert_pretrainer", skip_padding=False, **kwargs):
        super().__init__(config, name, **kwargs)
        self.skip_padding = skip_padding
        c = self.config
        self.masked_lm = MaskedLMHead(
            c.vocab_size, c.hidden_size, c.hidden_act, c.initializer_range,
            dtype=self.dtype_policy, name="predictions"
        )
        self.next_sentence = NextSentenceHead(
            c.hidden_size, c.initializer_range, dtype=self.dtype_policy, name="seq_relationship"
        )
        self.masked_lm.build()
        self.next_sentence.build()

    # The original-layout scope of the masked-LM head (`masked_lm_logits`'s weights).
    masked_lm_scope = "cls/predictions"

    def masked_lm_logits(self, features, training=False):
        """float32 `[B, P, V]`: the masked LM's logits at `features["masked_lm_positions"]`."""
        outputs = self.encoder(_encoder_inputs(features), training=training,
                               skip_padding=self.skip_padding)
        return self.masked_lm(outputs["sequence_output"], features["masked_lm_positions"],
                              self.encoder.embedding_table)

    def call(self, features, training=False):
        outputs = self.encoder(_encoder_inputs(features), training=training,
                            skip_padding=self.skip_padding)
        mlm = self.masked_lm(outputs["sequence_output"], features["masked_lm_positions"],
                             self.encoder.embedding_table)
        pooled = outputs["pooled_output"]
        if "sequence_starts" in features:
            pooled = self.encoder.pool(outputs["sequence_output"], features["sequence_starts"])
        nsp = keras.ops.cast(self.next_sentence(pooled), "float32")
        return {"masked_lm_logits": mlm, "next_sentence_logits": nsp}

    def get_config(self):
        return {**self._config_dict(), "skip_padding": self.skip_padding}

    def tf1_head_variables(self):
        mlm = self.masked_lm
        return (dense_names("cls/predictions/transform/dense", mlm.transform)
                + layer_norm_names("cls/predictions/transform/LayerNorm", mlm.layer_norm)
                + [("cls/predictions/output_bias", mlm.output_bias)]
                + output_layer_names("cls/seq_relationship", self.next_sentence))


class BertClassifier(BertTaskModel):
    """Encoder + classification layer (run_classifier's `create_model`).

    `num_labels=1` gives the one-output regression model used for STS-B.
    Returns: `logits` float32 `[B, num_labels]`; packed rows (`bert_runner.packing`: features
    with `sequence_ids`, `position_ids` and `sequence_starts` int `[B, K]`) `[B, K, num_labels]`,
    one per sequence slot, each from its own [CLS].
    """

    # The head layer's name: our checkpoints store variables by path (`classifier/...`).
    head_name = "classifier"

    def __init__(self, config, num_labels, name="bert_classifier", **kwargs):
        super().__init__(config, name, **kwargs)
        self.num_labels = num_labels
        self.classifier = ClassificationHead(
            num_labels, self.config.hidden_size, dtype=self.dtype_policy, name=self.head_name)
        self.classifier.build()

    def call(self, features, training=False):
        outputs = self.encode(features, training=training, skip_padding=True,
                              first_row_apart=True)
        pooled = outputs["pooled_output"]
        if "sequence_starts" in features:
            pooled = self.encoder.pool(outputs["sequence_output"], features["sequence_starts"])
        return {"logits": keras.ops.cast(self.classifier(pooled, training=training), "float32")}

    def get_config(self):
        return {**self._config_dict(), "num_labels": self.num_labels}

    def tf1_head_variables(self):
        # run_classifier creates these at the top level, outside any scope.
        return output_layer_names("", self.classifier)


class BertMultiLabelClassifier(BertClassifier):
    """Encoder + one logit per label, each label independent (sigmoid, binary cross-entropy):
    run_classifier's `--task_name=multilabel`. The original release has none.

    The layer is the classifier's (dropout 0.1, stddev 0.02) under its own names, so a
    single-label classifier's `output_weights` of another shape is never loaded into it: TF1
    `cls/multi_label/output_weights [L, H]`, `cls/multi_label/output_bias [L]` (beside
    run_squad's `cls/squad/...`), and `multi_label/...` in our checkpoints.
    Returns: `logits` float32 `[B, num_labels]`.
    """

    head_name = "multi_label"

    def __init__(self, config, num_labels, name="bert_multi_label_classifier", **kwargs):
        super().__init__(config, num_labels, name=name, **kwargs)

    def tf1_head_variables(self):
        return output_layer_names("cls/multi_label", self.classifier)


class BertSpanLabeler(BertTaskModel):
    """Encoder + SQuAD span layer (run_squad's `create_model`).

    `train_pooler`: whether the encoder's pooler is trainable. The span layer reads no pooled
    output, so the span loss does not reach the pooler: the original's optimizer got a None
    gradient for it and skipped it (no update, no weight decay). False (the default) does the
    same, and keeps a trainer from differentiating it; its weights are still loaded and saved.
    Returns: `start_logits`, `end_logits` float32 `[B, S]`.
    """

    def __init__(self, config, name="bert_span_labeler", train_pooler=False, **kwargs):
        super().__init__(config, name, **kwargs)
        self.train_pooler = train_pooler
        self.encoder.pooler.trainable = train_pooler
        self.span = SpanHead(self.config.hidden_size, dtype=self.dtype_policy, name="squad")
        self.span.build()

    def call(self, features, training=False):
        sequence = self.encode(features, training=training)["sequence_output"]
        start, end = self.span(sequence)
        return {
            "start_logits": keras.ops.cast(start, "float32"),
            "end_logits": keras.ops.cast(end, "float32"),
        }

    def get_config(self):
        return {**self._config_dict(), "train_pooler": self.train_pooler}

    def tf1_head_variables(self):
        return output_layer_names("cls/squad", self.span)
