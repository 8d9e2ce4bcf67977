"""The BERT family (Devlin et al. 2018): `BertConfig`, `BertModel` and its task models, its
variables' names in the original release's layout and in Hugging Face's, and its `config.json`.

Hugging Face's `"gelu"` is the exact erf form, so imported configs use `hidden_act="gelu_exact"`;
their tanh variants (`gelu_new`, `gelu_pytorch_tanh`) map to the original's `"gelu"`, and
`config_to_hf` writes the inverse. The Hugging Face names are derived from the original names by
fixed rules (`hf_name`, inverted by `original_name`), so the two layouts cannot drift apart.
`BertFamily` is also the declaration of a family whose Hugging Face layout is BERT's under
another scope, with its own heads (`ElectraFamily` subclasses it).
"""
import functools
import re

from modeling.bert import checkpoint_names
from modeling.bert.config import REQUIRED_KEYS, BertConfig
from modeling.bert.encoder import BertModel
from modeling.bert.multiple_choice import BertMultipleChoice
from modeling.bert.sentence_encoder import BertSentenceEncoder
from modeling.bert.task_models import (
    BertClassifier, BertMultiLabelClassifier, BertPretrainer, BertSpanLabeler)
from modeling.bert.token_classifier import BertTokenClassifier
from modeling.family import HfHead, ModelFamily


def _classification_problem(num_labels):
    return "regression" if num_labels == 1 else "single_label_classification"


_CLASSIFIER = {"output_weights": "classifier.weight", "output_bias": "classifier.bias"}


class BertFamily(ModelFamily):
    """BERT's declaration (`modeling.family.ModelFamily`)."""

    name = "bert"
    config_class = BertConfig
    models = {"encoder": BertModel, "pretrainer": BertPretrainer, "classifier": BertClassifier,
              "multi_label": BertMultiLabelClassifier, "span": BertSpanLabeler,
              "multiple_choice": BertMultipleChoice, "token": BertTokenClassifier,
              "sentence_encoder": BertSentenceEncoder}
    original_scope = "bert"
    hf_model_types = ("bert",)
    # The fine-tuned models as transformers' classes: each head's original names under the
    # class's. SWAG's scorer has no bias (a bias shared by the choices cancels in the softmax):
    # BertForMultipleChoice's is written as 0.
    hf_heads = {
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

    # config.json's activations as this project names them, and back (the tanh GELU of the
    # original release under its Hugging Face name).
    HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                      "relu": "relu", "tanh": "tanh", "linear": "linear"}
    TO_HF_ACTIVATIONS = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu",
                         "tanh": "tanh", "linear": "linear"}
    # The config keys config.json holds as they are.
    CONFIG_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
                   "max_position_embeddings", "type_vocab_size", "initializer_range")
    # transformers' classes of the bare encoder and of the encoder with both pre-training heads.
    ENCODER_ARCHITECTURE = "BertModel"
    PRETRAINING_ARCHITECTURE = "BertForPreTraining"
    # Head variables whose Hugging Face names do not follow the scope rules; a kernel among
    # them is transposed as the rules' are.
    HEAD_NAMES = {
        "cls/predictions/output_bias": "cls.predictions.bias",
        "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
        "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
        "output_weights": "classifier.weight",
        "output_bias": "classifier.bias",
        "cls/squad/output_weights": "qa_outputs.weight",
        "cls/squad/output_bias": "qa_outputs.bias",
    }
    # The Hugging Face names of heads, saved without the model prefix.
    HEAD_PREFIXES = ("cls.", "classifier.", "qa_outputs.")
    # The Hugging Face names (a pattern) of the tied decoder, which transformers saves and the
    # original model does not hold (it is the word embeddings).
    TIED = r"cls\.predictions\.decoder\.(weight|bias)"

    def claims_config(self, data):
        """Whether the dict of a config file is the original's `bert_config.json` (all its
        keys)."""
        return all(key in data for key in REQUIRED_KEYS)

    def config_from_dict(self, data, path):
        return self.config_class.from_file_dict(data, path)

    def encoder_names(self, encoder):
        """`[(original name, variable)]` of the encoder under `original_scope`."""
        return checkpoint_names.encoder_names(encoder, self.original_scope)

    def config_from_hf(self, hf, path):
        """The config of a Hugging Face `config.json` of BERT's form: `CONFIG_KEYS`, the
        activation, LayerNorm's epsilon and absolute positions checked."""
        family = self.name.upper()
        missing = [k for k in self.CONFIG_KEYS if k not in hf]
        if missing:
            raise ValueError(f"{path}: missing {family} config keys {missing}")
        act = hf.get("hidden_act", "gelu")
        if act not in self.HF_ACTIVATIONS:
            raise ValueError(f"{path}: hidden_act {act!r} is not supported "
                             f"({sorted(self.HF_ACTIVATIONS)})")
        if abs(hf.get("layer_norm_eps", 1e-12) - 1e-12) > 0:
            raise ValueError(f"{path}: layer_norm_eps {hf['layer_norm_eps']} is not {family}'s "
                             "1e-12")
        if hf.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are supported")
        config = self.config_class.from_dict({k: hf[k] for k in self.CONFIG_KEYS})
        config.hidden_act = self.HF_ACTIVATIONS[act]
        return config.validate(source=path)

    def config_to_hf(self, config):
        """The `config.json` dict of the bare encoder (`transformers.BertModel`). A
        left-to-right model (`config.causal`) is refused: `BertModel` would attend both ways."""
        if config.causal:
            raise ValueError("a left-to-right model (\"pretraining_objective\": \"ltr\") has no "
                             "Hugging Face BertModel form: transformers' BertModel attends both "
                             "ways and would compute other outputs; export it as a SavedModel")
        act = (config.hidden_act or "linear").lower()
        return {"architectures": [self.ENCODER_ARCHITECTURE],
                "model_type": self.hf_model_types[0], "hidden_act": self.TO_HF_ACTIVATIONS[act],
                "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute",
                **{key: getattr(config, key) for key in self.CONFIG_KEYS}}

    def hf_name(self, original_name):
        """By `HEAD_NAMES`, else by rules: `layer_<i>` -> `layer.<i>`, `/` -> `.`, a `kernel`
        -> a transposed `weight`, LayerNorm `gamma`/`beta` -> `weight`/`bias`, an embedding
        table -> its `.weight`. `output_weights` are already `[out, in]` in both layouts."""
        transpose = original_name.endswith("/kernel")
        if original_name in self.HEAD_NAMES:
            return self.HEAD_NAMES[original_name], transpose
        name = re.sub(r"layer_(\d+)", r"layer.\1", original_name).replace("/", ".")
        name = re.sub(r"\.kernel$", ".weight", name)
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if re.search(r"embeddings\.\w+_embeddings$", name):
            name += ".weight"
        return name, transpose

    def original_name(self, hf_name):
        if hf_name in self._head_original_names:
            original = self._head_original_names[hf_name]
            return original, original.endswith("/kernel")
        name = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", hf_name)
        name = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", name)
        name = re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", name)
        name = re.sub(r"(embeddings\.\w+_embeddings)\.weight$", r"\1", name)
        transpose = name.endswith(".weight")
        name = re.sub(r"\.weight$", ".kernel", name)
        return name.replace(".", "/"), transpose

    @functools.cached_property
    def _head_original_names(self):
        """`HEAD_NAMES` inverted: `{Hugging Face name: original name}`."""
        return {hf: original for original, hf in self.HEAD_NAMES.items()}

    def normalise_hf_names(self, tensors):
        """Accepts checkpoints saved with or without the model prefix (a bare model has none)
        and with the old `gamma`/`beta` LayerNorm names; leaves out `position_ids` and the tied
        decoder (`TIED`)."""
        out = {}
        for name, value in tensors.items():
            if re.search(rf"(^|\.)(position_ids|{self.TIED})$", name):
                continue
            name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
            name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
            if not name.startswith(self.HEAD_PREFIXES + (self.hf_encoder_prefix,)):
                name = self.hf_encoder_prefix + name
            out[name] = value
        return out

    def hf_folders(self, model):
        """For the pre-training model, the encoder and both heads as `BertForPreTraining`
        saves them (`bert.*`, `cls.*`; the decoder left to transformers' tying to the word
        embeddings and to `cls.predictions.bias`, as it saves it); None for the others."""
        if not isinstance(model, BertPretrainer):
            return None
        tensors = self.hf_tensors(self.encoder_names(model.encoder) + model.tf1_head_variables())
        return [("", {**self.config_to_hf(model.config),
                      "architectures": [self.PRETRAINING_ARCHITECTURE]}, tensors)]


BERT = BertFamily()
