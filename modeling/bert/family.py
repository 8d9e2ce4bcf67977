"""The BERT family (Devlin et al. 2018): `BertConfig`, `BertModel` and its task models, its
variables' names in the original release's layout and in Hugging Face's, and its `config.json`.

Hugging Face's `"gelu"` is the exact erf form, so imported configs use `hidden_act="gelu_exact"`;
their tanh variants (`gelu_new`, `gelu_pytorch_tanh`) map to the original's `"gelu"`, and
`config_to_hf` writes the inverse. The Hugging Face names are derived from the original names by
fixed rules (`hf_name`, inverted by `original_name`), so the two layouts cannot drift apart.
"""
import re

from modeling.bert.encoder import BertModel
from modeling.bert.checkpoint_names import encoder_names
from modeling.bert.config import REQUIRED_KEYS, BertConfig
from modeling.family import HfHead, ModelFamily
from modeling.bert.multiple_choice import BertMultipleChoice
from modeling.bert.sentence_encoder import BertSentenceEncoder
from modeling.bert.task_models import (
    BertClassifier, BertMultiLabelClassifier, BertPretrainer, BertSpanLabeler)
from modeling.bert.token_classifier import BertTokenClassifier

SCOPE = "bert"


def encoder_variable_map(bert, prefix=SCOPE):
    """`[(original name, variable)]` of a `BertModel`, in the original's creation order."""
    return encoder_names(bert, prefix)


# config.json's activations as this project names them.
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
# The tanh GELU of the original release under its Hugging Face name (`config_to_hf`).
TO_HF_ACTIVATIONS = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu", "tanh": "tanh",
                      "linear": "linear"}
CONFIG_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)
# Head variables whose Hugging Face names do not follow the scope rules.
_HEAD_NAMES = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
    "cls/squad/output_weights": "qa_outputs.weight",
    "cls/squad/output_bias": "qa_outputs.bias",
}
_HEAD_ORIGINAL_NAMES = {hf: original for original, hf in _HEAD_NAMES.items()}
# The Hugging Face names of heads, saved without the model prefix.
HEAD_PREFIXES = ("cls.", "classifier.", "qa_outputs.")
# Entries Hugging Face saves that duplicate tied or constant state.
IGNORED = re.compile(r"(^|\.)(position_ids|cls\.predictions\.decoder\.(weight|bias))$")
# transformers' class of a directory holding the encoder and both pre-training heads.
PRETRAINING_ARCHITECTURE = "BertForPreTraining"


def _classification_problem(num_labels):
    return "regression" if num_labels == 1 else "single_label_classification"


# The fine-tuned models as transformers' classes (`ModelFamily.hf_heads`): each head's original
# names under the class's. SWAG's scorer has no bias (a bias shared by the choices cancels in the
# softmax): BertForMultipleChoice's is written as 0.
_CLASSIFIER = {"output_weights": "classifier.weight", "output_bias": "classifier.bias"}
HF_HEADS = {
    "classifier": HfHead("BertForSequenceClassification", _CLASSIFIER,
                         problem_type=_classification_problem, labels=True),
    "multi_label": HfHead("BertForSequenceClassification",
                          {f"cls/multi_label/{n}": hf for n, hf in _CLASSIFIER.items()},
                          problem_type=lambda num_labels: "multi_label_classification",
                          labels=True),
    "token": HfHead("BertForTokenClassification", _CLASSIFIER, pooler=False, labels=True),
    "span": HfHead("BertForQuestionAnswering",
                   {"cls/squad/output_weights": "qa_outputs.weight",
                    "cls/squad/output_bias": "qa_outputs.bias"}, pooler=False),
    "multiple_choice": HfHead("BertForMultipleChoice",
                              {"cls/swag/output_weights": "classifier.weight"},
                              zeros={"classifier.bias": (1,)}),
}


def claims_config(data):
    """Whether the dict of a config file is the original's `bert_config.json` (all its keys)."""
    return all(key in data for key in REQUIRED_KEYS)


def config_from_hf(hf, path, config_class=BertConfig, keys=CONFIG_KEYS, family="BERT"):
    """A `BertConfig` from the dict of a Hugging Face BERT `config.json` at `path` (named in the
    errors); another family's config of the same form with its `config_class` and `keys`."""
    missing = [k for k in keys if k not in hf]
    if missing:
        raise ValueError(f"{path}: missing {family} config keys {missing}")
    act = hf.get("hidden_act", "gelu")
    if act not in HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {act!r} is not supported ({sorted(HF_ACTIVATIONS)})")
    if abs(hf.get("layer_norm_eps", 1e-12) - 1e-12) > 0:
        raise ValueError(f"{path}: layer_norm_eps {hf['layer_norm_eps']} is not {family}'s 1e-12")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{path}: only absolute position embeddings are supported")
    config = config_class.from_dict({k: hf[k] for k in keys})
    config.hidden_act = HF_ACTIVATIONS[act]
    return config.validate(source=path)


def config_to_hf(config):
    """The Hugging Face `config.json` dict of a `BertConfig` (for `transformers.BertModel`).
    A left-to-right model (`config.causal`) is refused: `BertModel` would attend both ways."""
    if config.causal:
        raise ValueError("a left-to-right model (\"pretraining_objective\": \"ltr\") has no "
                         "Hugging Face BertModel form: transformers' BertModel attends both ways "
                         "and would compute other outputs; export it as a SavedModel")
    hf = {key: getattr(config, key) for key in CONFIG_KEYS}
    act = (config.hidden_act or "linear").lower()
    return {"architectures": ["BertModel"], "model_type": "bert",
            "hidden_act": TO_HF_ACTIVATIONS[act], "layer_norm_eps": 1e-12, "pad_token_id": 0,
            "position_embedding_type": "absolute", **hf}


def hf_name(original_name):
    """Original name → (Hugging Face name, whether the array is transposed).

    Dense kernels are `[in, out]` in TF1 and `[out, in]` in PyTorch; `output_weights` are
    already `[out, in]` in both.
    """
    if original_name in _HEAD_NAMES:
        return _HEAD_NAMES[original_name], False
    name = re.sub(r"layer_(\d+)", r"layer.\1", original_name).replace("/", ".")
    transpose = name.endswith(".kernel")
    name = re.sub(r"\.kernel$", ".weight", name)
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    if re.search(r"embeddings\.\w+_embeddings$", name):
        name += ".weight"
    return name, transpose


def original_name(hf_name_):
    """Hugging Face name → (original name, whether the array is transposed): `hf_name`
    inverted."""
    if hf_name_ in _HEAD_ORIGINAL_NAMES:
        return _HEAD_ORIGINAL_NAMES[hf_name_], False
    name = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", hf_name_)
    name = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", name)
    name = re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", name)
    name = re.sub(r"(embeddings\.\w+_embeddings)\.weight$", r"\1", name)
    transpose = name.endswith(".weight")
    name = re.sub(r"\.weight$", ".kernel", name)
    return name.replace(".", "/"), transpose


def hf_folders(model):
    """The Hugging Face directory of `model` (`ModelFamily.hf_folders`): for the pre-training
    model, the encoder and both heads as `BertForPreTraining` saves them (`bert.*`, `cls.*`; the
    decoder left to transformers' tying to the word embeddings and to `cls.predictions.bias`,
    as it saves it); None for the others (the encoder as `BertModel`)."""
    if not isinstance(model, BertPretrainer):
        return None
    tensors = BERT.hf_tensors(encoder_variable_map(model.encoder) + model.tf1_head_variables())
    return [("", {**config_to_hf(model.config), "architectures": [PRETRAINING_ARCHITECTURE]},
             tensors)]


def normalise_hf_names(tensors):
    """Accepts checkpoints saved with or without the `bert.` prefix (a bare `BertModel` has
    none) and with the old `gamma`/`beta` LayerNorm names."""
    out = {}
    for name, value in tensors.items():
        if IGNORED.search(name):
            continue
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        is_head = name.startswith(HEAD_PREFIXES)
        if not is_head and not name.startswith(f"{SCOPE}."):
            name = f"{SCOPE}.{name}"
        out[name] = value
    return out


BERT = ModelFamily(
    name="bert",
    config_class=BertConfig,
    claims_config=claims_config,
    config_from_file=BertConfig.from_json_file,
    models={"encoder": BertModel, "pretrainer": BertPretrainer, "classifier": BertClassifier,
            "multi_label": BertMultiLabelClassifier, "span": BertSpanLabeler,
            "multiple_choice": BertMultipleChoice, "token": BertTokenClassifier,
            "sentence_encoder": BertSentenceEncoder},
    encoder_names=encoder_variable_map,
    original_scope=SCOPE,
    hf_model_types=("bert",),
    hf_name=hf_name,
    original_name=original_name,
    normalise_hf_names=normalise_hf_names,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    hf_encoder_prefix=f"{SCOPE}.",
    hf_folders=hf_folders,
    hf_heads=HF_HEADS,
)
