"""The Keras 3 BERT model: config, encoder, heads, losses and task models.

The model is written with `keras.ops`/`keras.layers`, so it also runs under the JAX backend; on
TensorFlow the encoder blocks use fused kernels by default (`modeling.layers.kernels`, `BertModel`'s
`kernels` argument). A model family (`modeling.families`) names its variables in the original
layout and Hugging Face's; every checkpoint is read and written through `modeling.checkpoint`.

The names below are imported on first use, so that the package's light parts (which layout a
path is in, `modeling.checkpoint.layout`, read while a script's flags are checked) load without
Keras and TensorFlow.
"""
from modeling.lazy_names import module_getattr

# Public name: (its module, its name there).
_PUBLIC = {
    "BertClassifier": ("modeling.bert.task_models", "BertClassifier"),
    "BertConfig": ("modeling.bert.config", "BertConfig"),
    "BertModel": ("modeling.bert.encoder", "BertModel"),
    "BertMultiLabelClassifier": ("modeling.bert.task_models", "BertMultiLabelClassifier"),
    "BertMultipleChoice": ("modeling.bert.multiple_choice", "BertMultipleChoice"),
    "BertPretrainer": ("modeling.bert.task_models", "BertPretrainer"),
    "BertSpanLabeler": ("modeling.bert.task_models", "BertSpanLabeler"),
    "BertTaskModel": ("modeling.bert.task_models", "BertTaskModel"),
    "BertTokenClassifier": ("modeling.bert.token_classifier", "BertTokenClassifier"),
    "ClassificationHead": ("modeling.layers.heads", "ClassificationHead"),
    "ConfigNeeded": ("modeling.bert.config", "ConfigNeeded"),
    "EncoderModes": ("modeling.bert.modes", "EncoderModes"),
    "MaskedLMHead": ("modeling.layers.heads", "MaskedLMHead"),
    "NextSentenceHead": ("modeling.layers.heads", "NextSentenceHead"),
    "SpanHead": ("modeling.layers.heads", "SpanHead"),
    "build_model": ("modeling.families", "build_model"),
    "classification_loss": ("modeling.losses", "classification_loss"),
    "LoraSettings": ("modeling.layers.lora", "LoraSettings"),
    "gelu": ("modeling.layers.activations", "gelu"),
    "gelu_exact": ("modeling.layers.activations", "gelu_exact"),
    "get_activation": ("modeling.layers.activations", "get_activation"),
    "masked_lm_loss": ("modeling.losses", "masked_lm_loss"),
    "multi_label_loss": ("modeling.losses", "multi_label_loss"),
    "next_token_loss": ("modeling.losses", "next_token_loss"),
    "regression_loss": ("modeling.losses", "regression_loss"),
    "span_loss": ("modeling.losses", "span_loss"),
    "trainable_count": ("modeling.layers.lora", "trainable_count"),
    "with_lora": ("modeling.optimization", "with_lora"),
}
__all__ = sorted(_PUBLIC)

__getattr__ = module_getattr(__name__, _PUBLIC, globals())
