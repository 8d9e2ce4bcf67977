"""The Keras 3 BERT model: config, encoder, heads, losses and task models.

The model is written with `keras.ops`/`keras.layers`, so it also runs under the JAX backend; on
TensorFlow the encoder blocks use fused kernels by default (`modeling.kernels`, `BertModel`'s
`kernels` argument). A model family (`modeling.families`) names its variables in the original
layout and Hugging Face's; every checkpoint is read and written through `modeling.checkpoint`.
"""
from modeling.activations import gelu, gelu_exact, get_activation
from modeling.bert_model import BertModel
from modeling.config import BertConfig
from modeling.families import build_model
from modeling.heads import ClassificationHead, MaskedLMHead, NextSentenceHead, SpanHead
from modeling.lora import check_rank as check_lora_rank, enable_lora, trainable_count
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
    "build_model",
    "check_lora_rank",
    "enable_lora",
    "classification_loss",
    "gelu",
    "gelu_exact",
    "get_activation",
    "masked_lm_loss",
    "multi_label_loss",
    "next_token_loss",
    "regression_loss",
    "span_loss",
    "trainable_count",
]
