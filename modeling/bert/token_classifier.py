"""`BertTokenClassifier`: the encoder with a per-token classification layer (BERT paper section
5.3, named-entity recognition; run_ner.py).

The layer is run_classifier's (dropout 0.1, `output_weights [num_labels, H]`, `output_bias
[num_labels]`, stddev 0.02) applied to every position of the last layer instead of the pooled
output; the paper classifies each word's first sub-token with it, without a CRF. The original
release has no NER script: in TF1 checkpoints the layer is stored at the top level as
run_classifier stores it, which is also where the TF1 BERT-NER ports derived from run_classifier
keep it.
"""
import keras

from modeling.bert.task_models import BertClassifier


class BertTokenClassifier(BertClassifier):
    """Encoder + token classification layer: `BertClassifier`'s layer (and variable names) on
    every position of the sequence output.

    Inputs: `input_ids`, `input_mask`, `segment_ids` int `[B, S]`.
    Returns: `logits` float32 `[B, S, num_labels]`; the encoder skips padded rows
    (`skip_padding`), so only real positions hold their tokens' logits.
    """

    def __init__(self, config, num_labels, name="bert_token_classifier", **kwargs):
        super().__init__(config, num_labels, name=name, **kwargs)

    def call(self, features, training=False):
        sequence = self.encode(features, training=training, skip_padding=True)["sequence_output"]
        return {"logits": keras.ops.cast(self.classifier(sequence, training=training), "float32")}
