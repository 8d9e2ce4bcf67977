"""The ELECTRA family (Clark et al. 2020, google-research/electra): `ElectraConfig`,
`ElectraModel` (the discriminator's encoder), its pre-training model (generator and
discriminator) and task models, its variables' names in the original release's layout and in
Hugging Face's, and its `config.json`.

Original names: the discriminator's encoder under `electra/` (the embedding tables, which the
generator shares, `embeddings_project`, `encoder/layer_<i>`), the generator's own layers under
`generator/`, the heads under `generator_predictions/` and `discriminator_predictions/`. A
released checkpoint comes without a config: `config_from_checkpoint` reads it from the shapes.
Hugging Face names follow BERT's rules (`ElectraFamily` extends `BertFamily`) under `electra.`; its
`ElectraForPreTraining` holds the discriminator and its head, `ElectraForMaskedLM` the generator
(saved as a model of its own).

The pre-training model in Hugging Face's layout is two directories (`read_hf`, `hf_folders`):
the discriminator as an `ElectraForPreTraining` directory, and in its `generator/` folder the
generator as an `ElectraForMaskedLM` directory. The generator's directory names its own layers
as a bare model's (`electra.embeddings_project.*`, `electra.encoder.*`: here
`generator/embeddings_project/*`, `generator/encoder/*`), its head as `generator_predictions.*`
and `generator_lm_head.bias`, and holds a copy of the embedding tables, which the original
shares with the discriminator: they must be equal to the discriminator's.
"""
import dataclasses
import os

import numpy as np

from modeling.bert.family import BertFamily
from modeling.electra import config as electra_config
from modeling.electra.config import ElectraConfig
from modeling.electra.encoder import ElectraModel
from modeling.electra.pretrainer import ElectraPretrainer
from modeling.electra.squad import ElectraSquadModel
from modeling.electra.task_models import (
    ElectraClassifier, ElectraMultiLabelClassifier, ElectraMultipleChoice, ElectraSentenceEncoder,
    ElectraTokenClassifier)
from modeling.hf_directory import HF_WEIGHT_FILES, is_hf_directory
from modeling.json_file import read_json_object

SCOPE = "electra"
# The original's fine-tuning default (configure_finetuning.py), and its large model's.
LAYERWISE_LR_DECAY, LARGE_LAYERWISE_LR_DECAY = 0.8, 0.9
_LARGE_HIDDEN_SIZE = 1024
# The folder of a pre-training model's Hugging Face directory that holds its generator, and the
# transformers classes of the discriminator's and the generator's directories.
GENERATOR_FOLDER = "generator"
_GENERATOR_SCOPE = "generator"
_DISCRIMINATOR, _GENERATOR = "ElectraForPreTraining", "ElectraForMaskedLM"
# The original names of the tables the generator shares (`<scope>/embeddings/...`), and of its
# head.
_TABLES = f"{SCOPE}/embeddings/"
_GENERATOR_HEAD = "generator_predictions/"
# config.json keys this project adds (transformers keeps and ignores them): the generator's size
# as fractions, so that a config reads back equal.
_GENERATOR_KEYS = ("generator_hidden_size", "generator_layers")
# The keys of a generator's config.json that must be those of the pre-training model's generator
# (`ElectraConfig.generator_config()`); the heads and the activation are not seen in the shapes.
_GENERATOR_CONFIG_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                          "num_attention_heads", "intermediate_size", "max_position_embeddings",
                          "type_vocab_size", "hidden_act")
# Why transformers has no class for ELECTRA's sequence classifiers (`ElectraFamily.hf_heads`).
_NO_CLASSIFIER = (
    "the original ELECTRA's classifier (dropout and one dense layer on the first token) is not "
    "ElectraForSequenceClassification's head (classifier.dense, GELU, classifier.out_proj), "
    "which cannot compute it exactly")


def _weights_file(folder):
    """The weights file of the Hugging Face directory `folder` (named in messages)."""
    return next((os.path.join(folder, n) for n in HF_WEIGHT_FILES
                 if os.path.isfile(os.path.join(folder, n))), folder)


def _check_generator_activation(config, where):
    """transformers' `ElectraForMaskedLM` applies the exact GELU in its head whatever
    `hidden_act` says, the original the config's activation: the two agree for `gelu_exact`
    only, so a generator of another activation has no Hugging Face form."""
    if config.hidden_act != "gelu_exact":
        raise ValueError(
            f"{where}: the generator's head has hidden_act {config.hidden_act!r}, but transformers'"
            f" {_GENERATOR} applies the exact GELU (\"gelu\") in its head whatever hidden_act "
            "says, so it would compute other logits")


def _is_generator(folder, tensors):
    """Whether the Hugging Face directory `folder` (its `{original name: array}` `tensors`) is
    an ELECTRA generator: its config.json names `ElectraForMaskedLM`, or it holds its head."""
    architectures = (read_json_object(os.path.join(folder, "config.json")) or {}).get(
        "architectures") or ()
    return _GENERATOR in architectures or any(n.startswith(_GENERATOR_HEAD) for n in tensors)


def _check_generator_config(path, model):
    """Refuses a generator `config.json` at `path` that describes another generator than the
    pre-training `model` builds (`ElectraConfig.generator_config()`), naming each key."""
    hf = read_json_object(path) or {}
    if not hf:
        raise ValueError(f"{path}: not a readable config.json (the generator of an ELECTRA "
                         "pre-training directory)")
    ours = model.generator.config
    differ = []
    for key in _GENERATOR_CONFIG_KEYS:
        value = hf.get(key, "gelu" if key == "hidden_act" else None)
        if key == "hidden_act":
            value = BertFamily.HF_ACTIVATIONS.get(value, value)
        if value != getattr(ours, key):
            differ.append(f"{key} {value!r} vs {getattr(ours, key)!r}")
    if differ:
        raise ValueError(
            f"{path} describes another generator than the pre-training model's (its config's "
            f"generator_hidden_size={model.config.generator_hidden_size}, generator_layers="
            f"{model.config.generator_layers}): {'; '.join(differ)}")


def _generator_name(name):
    """An original name of an `ElectraForMaskedLM` directory read alone (its encoder under
    `electra/`) as the pre-training model's: its own layers under `generator/`, its head as it
    is."""
    if name.startswith(f"{SCOPE}/"):
        return f"{_GENERATOR_SCOPE}/{name[len(SCOPE) + 1:]}"
    return name


class ElectraFamily(BertFamily):
    """ELECTRA's declaration: BERT's Hugging Face rules under its own scope, with its heads, its
    config files and its two-directory pre-training checkpoints."""

    name = "electra"
    config_class = ElectraConfig
    models = {"encoder": ElectraModel, "pretrainer": ElectraPretrainer,
              "classifier": ElectraClassifier, "multi_label": ElectraMultiLabelClassifier,
              "span": ElectraSquadModel, "multiple_choice": ElectraMultipleChoice,
              "token": ElectraTokenClassifier, "sentence_encoder": ElectraSentenceEncoder}
    original_scope = SCOPE
    hf_model_types = ("electra",)
    warmup_rule = "electra"
    config_file = "hparams JSON"
    config_from_checkpoint = staticmethod(ElectraConfig.from_original_shapes)
    # ElectraForMultipleChoice summarises a choice by its first token with no projection and no
    # activation when config.json says so (its SequenceSummary), as the original's head reads it.
    hf_heads = {
        "classifier": _NO_CLASSIFIER,
        "multi_label": _NO_CLASSIFIER,
        "span": ("the original ELECTRA's SQuAD head (start, then end given the start, and an "
                 "answerability logit) is not ElectraForQuestionAnswering's single qa_outputs "
                 "layer"),
        "token": dataclasses.replace(BertFamily.hf_heads["token"],
                                     architecture="ElectraForTokenClassification"),
        "multiple_choice": dataclasses.replace(
            BertFamily.hf_heads["multiple_choice"], architecture="ElectraForMultipleChoice",
            config={"summary_type": "first", "summary_use_proj": False,
                    "summary_activation": "linear", "summary_last_dropout": 0.1}),
    }

    CONFIG_KEYS = BertFamily.CONFIG_KEYS + ("embedding_size",)
    ENCODER_ARCHITECTURE = "ElectraModel"
    HEAD_NAMES = {
        **BertFamily.HEAD_NAMES,
        "discriminator_predictions/dense_1/kernel":
            "discriminator_predictions.dense_prediction.weight",
        "discriminator_predictions/dense_1/bias": "discriminator_predictions.dense_prediction.bias",
        "generator_predictions/output_bias": "generator_lm_head.bias",
    }
    HEAD_PREFIXES = BertFamily.HEAD_PREFIXES + (
        "discriminator_predictions.", "generator_predictions.", "generator_lm_head.")
    TIED = r"generator_lm_head\.weight"

    def claims_config(self, data):
        return electra_config.claims_config(data)

    def config_from_dict(self, data, path):
        return electra_config.config_from_dict(data, path)

    def layerwise_lr_decay(self, config):
        """The original's fine-tuning default: 0.8, 0.9 for ELECTRA-Large."""
        return LARGE_LAYERWISE_LR_DECAY if config.hidden_size >= _LARGE_HIDDEN_SIZE else \
            LAYERWISE_LR_DECAY

    def config_from_hf(self, hf, path):
        """BERT's reading, with `embedding_size` and the generator's size: the fractions this
        project writes (`config_to_hf`), else those of the `generator/` directory beside it
        (the generator's hidden size and layers over the discriminator's), else
        `ElectraConfig`'s defaults. Whether that generator is the one the model builds is
        checked when it is loaded (`read_hf`)."""
        config = super().config_from_hf(hf, path)
        recorded = {key: hf[key] for key in _GENERATOR_KEYS if key in hf}
        if not recorded:
            generator = read_json_object(os.path.join(os.path.dirname(os.fspath(path)),
                                                      GENERATOR_FOLDER, "config.json")) or {}
            sizes = [generator.get(k) for k in ("hidden_size", "num_hidden_layers")]
            if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
                recorded = {"generator_hidden_size": sizes[0] / config.hidden_size,
                            "generator_layers": sizes[1] / config.num_hidden_layers}
        config.__dict__.update(recorded)
        return config.validate(source=path)

    def config_to_hf(self, config):
        """BERT's (`transformers.ElectraModel`, with `embedding_size`), and the generator's
        fractions, which transformers ignores (`config_from_hf` reads them)."""
        return {**super().config_to_hf(config), "summary_type": "first",
                **{key: getattr(config, key) for key in _GENERATOR_KEYS}}

    def read_hf(self, location, model, read):
        """A generator (`ElectraForMaskedLM`) is refused for every model: fine-tuning, features
        and pre-training start from the discriminator. The pre-training model
        (`ElectraPretrainer`) also reads the generator from the `generator/` directory beside
        the weights, when there is one: its config.json must describe the model's generator,
        its embedding tables must equal the discriminator's (the original shares them;
        ValueError naming both files), its layers and head load under the generator's original
        names (`generator/...`, `generator_predictions/...`). Without it, the load's check of
        the model's required parts refuses the discriminator alone
        (`ElectraPretrainer.required_scopes`).
        """
        folder = location if os.path.isdir(location) else os.path.dirname(location) or "."
        tensors = read(location)
        pretraining = isinstance(model, ElectraPretrainer)
        if _is_generator(folder, tensors):
            raise ValueError(
                f"{folder} is an ELECTRA generator ({_GENERATOR}), not a discriminator: "
                "fine-tuning, features and pre-training start from the discriminator (e.g. "
                "google/electra-small-discriminator, not google/electra-small-generator)"
                + (f"; pre-training reads the generator from the {GENERATOR_FOLDER}/ folder of "
                   f"the discriminator's directory ({_DISCRIMINATOR})" if pretraining else ""))
        generator_folder = os.path.join(folder, GENERATOR_FOLDER)
        if not pretraining or not is_hf_directory(generator_folder):
            return tensors
        _check_generator_config(os.path.join(generator_folder, "config.json"), model)
        _check_generator_activation(model.config, generator_folder)
        generator = read(generator_folder)
        if not any(n.startswith(_GENERATOR_HEAD) for n in generator):
            raise ValueError(f"{generator_folder} holds no generator_predictions: not an "
                             f"ELECTRA generator ({_GENERATOR} directory)")
        for name, value in generator.items():
            if not name.startswith(_TABLES):
                tensors[_generator_name(name)] = value
                continue
            # The shared tables: the discriminator's are loaded; the generator's copy must be
            # them.
            shared = tensors.get(name)
            if shared is not None and (shared.shape != value.shape or not np.array_equal(
                    np.asarray(shared, np.float32), np.asarray(value, np.float32))):
                raise ValueError(
                    f"{_weights_file(generator_folder)} and {_weights_file(folder)} hold "
                    f"different {self.hf_name(name)[0]}: the generator and the discriminator of "
                    "ELECTRA share their embedding tables, so the generator is not this "
                    "discriminator's")
        return tensors

    def hf_folders(self, model):
        """For the pre-training model, the discriminator with its head
        (`ElectraForPreTraining`) and in `generator/` the generator with its head and a copy of
        the shared tables (`ElectraForMaskedLM`, its decoder left to transformers' tying to the
        word embeddings, as it saves it); None for the others (the encoder as `ElectraModel`)."""
        if not isinstance(model, ElectraPretrainer):
            return None
        config, encoder = model.config, self.encoder_names(model.encoder)
        _check_generator_activation(config, "the ELECTRA pre-training model")
        discriminator = self.hf_tensors(encoder + model.discriminator_predictions.original_names(
            "discriminator_predictions"))
        tables = [(name, var) for name, var in encoder if name.startswith(_TABLES)]
        own = [(f"{SCOPE}/{name[len(_GENERATOR_SCOPE) + 1:]}"
                if name.startswith(f"{_GENERATOR_SCOPE}/") else name, var)
               for name, var in model.generator_names()]
        generator_config = {key: value
                            for key, value in self.config_to_hf(model.generator.config).items()
                            if key not in _GENERATOR_KEYS}
        return [("", {**self.config_to_hf(config), "architectures": [_DISCRIMINATOR]},
                 discriminator),
                (GENERATOR_FOLDER, {**generator_config, "architectures": [_GENERATOR]},
                 self.hf_tensors(tables + own))]


ELECTRA = ElectraFamily()
