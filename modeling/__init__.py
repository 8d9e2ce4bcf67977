"""The Keras 3 BERT model: config, encoder, heads, losses and task models.

The model is written with `keras.ops`/`keras.layers`, so it also runs under the JAX backend; on
TensorFlow the encoder blocks use fused kernels by default (`modeling.kernels`, `BertModel`'s
`kernels` argument). Checkpoint interop lives in `modeling.tf1_checkpoint` (TensorFlow) and
`modeling.hf_checkpoint` (NumPy), imported on demand.
"""
from modeling.activations import gelu, gelu_exact, get_activation
from modeling.bert_model import BertModel
from modeling.config import BertConfig
from modeling.heads import ClassificationHead, MaskedLMHead, NextSentenceHead, SpanHead
from modeling.losses import (
    classification_loss, masked_lm_loss, multi_label_loss, next_token_loss, regression_loss,
    span_loss)
from modeling.multiple_choice import BertMultipleChoice
from modeling.task_models import (
    BertClassifier, BertMultiLabelClassifier, BertPretrainer, BertSpanLabeler, BertTaskModel)
from modeling.token_classifier import BertTokenClassifier

__all__ = [
    "BertClassifier",
    "BertConfig",
    "BertModel",
    "BertMultiLabelClassifier",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanLabeler",
    "BertTaskModel",
    "BertTokenClassifier",
    "ClassificationHead",
    "MaskedLMHead",
    "NextSentenceHead",
    "SpanHead",
    "classification_loss",
    "gelu",
    "gelu_exact",
    "get_activation",
    "masked_lm_loss",
    "multi_label_loss",
    "next_token_loss",
    "regression_loss",
    "span_loss",
]
