"""The ELECTRA family (Clark et al. 2020, google-research/electra): `ElectraConfig`,
`ElectraModel` (the discriminator's encoder), its pre-training model (generator and
discriminator) and task models, its variables' names in the original release's layout and in
Hugging Face's, and its `config.json`.

Original names: the discriminator's encoder under `electra/` (the embedding tables, which the
generator shares, `embeddings_project`, `encoder/layer_<i>`), the generator's own layers under
`generator/`, the heads under `generator_predictions/` and `discriminator_predictions/`. A
released checkpoint comes without a config: `config_from_checkpoint` reads it from the shapes.
Hugging Face names follow BERT's rules (`bert.hf_name`) under `electra.`; its
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
import re

import numpy as np

from modeling.bert.checkpoint_names import encoder_names
from modeling.hf_directory import HF_WEIGHT_FILES, is_hf_directory, json_object
from modeling.electra.config import ElectraConfig, claims_config, config_from_file
from modeling.electra.encoder import ElectraModel
from modeling.electra.pretrainer import ElectraPretrainer
from modeling.electra.squad import ElectraSquadModel
from modeling.electra.task_models import (
    ElectraClassifier, ElectraMultiLabelClassifier, ElectraMultipleChoice, ElectraSentenceEncoder,
    ElectraTokenClassifier)
from modeling.bert import family as bert
from modeling.family import ModelFamily

SCOPE = "electra"
# The original's fine-tuning default (configure_finetuning.py), and its large model's.
LAYERWISE_LR_DECAY, LARGE_LAYERWISE_LR_DECAY = 0.8, 0.9
_LARGE_HIDDEN_SIZE = 1024

# Head variables whose Hugging Face names do not follow the scope rules.
_HEAD_NAMES = {
    "discriminator_predictions/dense_1/kernel": ("discriminator_predictions.dense_prediction"
                                                 ".weight", True),
    "discriminator_predictions/dense_1/bias": ("discriminator_predictions.dense_prediction.bias",
                                               False),
    "generator_predictions/output_bias": ("generator_lm_head.bias", False),
}
_HEAD_ORIGINAL_NAMES = {hf: (original, transpose)
                        for original, (hf, transpose) in _HEAD_NAMES.items()}
_HEAD_PREFIXES = ("discriminator_predictions.", "generator_predictions.", "generator_lm_head.")
# Entries Hugging Face saves that duplicate tied or constant state.
_IGNORED = re.compile(r"(^|\.)(position_ids|generator_lm_head\.weight)$")
# The folder of a pre-training model's Hugging Face directory that holds its generator, and the
# transformers classes of the three directories.
GENERATOR_FOLDER = "generator"
_GENERATOR_SCOPE = "generator"
_ENCODER, _DISCRIMINATOR, _GENERATOR = "ElectraModel", "ElectraForPreTraining", "ElectraForMaskedLM"
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


def encoder_variable_map(encoder, prefix=SCOPE):
    """`[(original name, variable)]` of an `ElectraModel`, in the original's creation order."""
    return encoder_names(encoder, prefix)


def hf_name(original_name):
    """Original name -> (Hugging Face name, whether the array is transposed)."""
    if original_name in _HEAD_NAMES:
        return _HEAD_NAMES[original_name]
    return bert.hf_name(original_name)


def original_name(hf_name_):
    """Hugging Face name -> (original name, transposed): `hf_name` inverted."""
    if hf_name_ in _HEAD_ORIGINAL_NAMES:
        return _HEAD_ORIGINAL_NAMES[hf_name_]
    return bert.original_name(hf_name_)


def normalise_hf_names(tensors):
    """Accepts checkpoints saved with or without the `electra.` prefix (a bare `ElectraModel`
    has none); leaves out the tied decoder and `position_ids`."""
    out = {}
    for name, value in tensors.items():
        if _IGNORED.search(name):
            continue
        is_head = name.startswith(_HEAD_PREFIXES + bert.HEAD_PREFIXES)
        if not is_head and not name.startswith(f"{SCOPE}."):
            name = f"{SCOPE}.{name}"
        out[name] = value
    return out


def config_from_hf(hf, path):
    """An `ElectraConfig` from the dict of a Hugging Face ELECTRA `config.json` at `path`.

    The generator's size: the fractions this project writes (`config_to_hf`), else those of the
    `generator/` directory beside it (the generator's hidden size and layers over the
    discriminator's), else `ElectraConfig`'s defaults. Whether that generator is the one the
    model builds is checked when it is loaded (`read_hf`)."""
    config = bert.config_from_hf(hf, path, ElectraConfig, bert.CONFIG_KEYS + ("embedding_size",),
                                 "ELECTRA")
    recorded = {key: hf[key] for key in _GENERATOR_KEYS if key in hf}
    if not recorded:
        generator = json_object(os.path.join(os.path.dirname(os.fspath(path)),
                                              GENERATOR_FOLDER, "config.json"))
        sizes = [generator.get(k) for k in ("hidden_size", "num_hidden_layers")]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            recorded = {"generator_hidden_size": sizes[0] / config.hidden_size,
                        "generator_layers": sizes[1] / config.num_hidden_layers}
    config.__dict__.update(recorded)
    return config.validate(source=path)


def config_to_hf(config):
    """The Hugging Face `config.json` dict of an `ElectraConfig` (`transformers.ElectraModel`),
    with the generator's fractions, which transformers ignores (`config_from_hf` reads them)."""
    return {**bert.config_to_hf(config), "architectures": [_ENCODER],
            "model_type": "electra", "embedding_size": config.embedding_size,
            "summary_type": "first",
            **{key: getattr(config, key) for key in _GENERATOR_KEYS}}


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
    architectures = json_object(os.path.join(folder, "config.json")).get("architectures") or ()
    return _GENERATOR in architectures or any(n.startswith(_GENERATOR_HEAD) for n in tensors)


def _check_generator_config(path, model):
    """Refuses a generator `config.json` at `path` that describes another generator than the
    pre-training `model` builds (`ElectraConfig.generator_config()`), naming each key."""
    hf = json_object(path)
    if not hf:
        raise ValueError(f"{path}: not a readable config.json (the generator of an ELECTRA "
                         "pre-training directory)")
    ours = model.generator.config
    differ = []
    for key in _GENERATOR_CONFIG_KEYS:
        value = hf.get(key, "gelu" if key == "hidden_act" else None)
        if key == "hidden_act":
            value = bert.HF_ACTIVATIONS.get(value, value)
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


def read_hf(location, model, read):
    """`{original name: array}` of the Hugging Face ELECTRA checkpoint at `location` as `model`
    loads it (`ModelFamily.read_hf`; `read(path)`: one directory's by this family's names).

    A generator (`ElectraForMaskedLM`) is refused for every model: fine-tuning, features and
    pre-training start from the discriminator. The pre-training model (`ElectraPretrainer`)
    also reads the generator from the `generator/` directory beside the weights, when there is
    one: its config.json must describe the model's generator, its embedding tables must equal
    the discriminator's (the original shares them; ValueError naming both files), its layers
    and head load under the generator's original names (`generator/...`,
    `generator_predictions/...`). Without it, the load's check of the model's required parts
    refuses the discriminator alone (`ElectraPretrainer.required_scopes`).
    """
    folder = location if os.path.isdir(location) else os.path.dirname(location) or "."
    tensors = read(location)
    pretraining = isinstance(model, ElectraPretrainer)
    if _is_generator(folder, tensors):
        raise ValueError(
            f"{folder} is an ELECTRA generator ({_GENERATOR}), not a discriminator: fine-tuning,"
            " features and pre-training start from the discriminator (e.g. "
            "google/electra-small-discriminator, not google/electra-small-generator)"
            + (f"; pre-training reads the generator from the {GENERATOR_FOLDER}/ folder of the "
               f"discriminator's directory ({_DISCRIMINATOR})" if pretraining else ""))
    generator_folder = os.path.join(folder, GENERATOR_FOLDER)
    if not pretraining or not is_hf_directory(generator_folder):
        return tensors
    _check_generator_config(os.path.join(generator_folder, "config.json"), model)
    _check_generator_activation(model.config, generator_folder)
    generator = read(generator_folder)
    if not any(n.startswith(_GENERATOR_HEAD) for n in generator):
        raise ValueError(f"{generator_folder} holds no generator_predictions: not an ELECTRA "
                         f"generator ({_GENERATOR} directory)")
    for name, value in generator.items():
        if not name.startswith(_TABLES):
            tensors[_generator_name(name)] = value
            continue
        # The shared tables: the discriminator's are loaded; the generator's copy must be them.
        shared = tensors.get(name)
        if shared is not None and (shared.shape != value.shape or not np.array_equal(
                np.asarray(shared, np.float32), np.asarray(value, np.float32))):
            raise ValueError(
                f"{_weights_file(generator_folder)} and {_weights_file(folder)} hold different "
                f"{hf_name(name)[0]}: the generator and the discriminator of ELECTRA share their "
                "embedding tables, so the generator is not this discriminator's")
    return tensors


def hf_folders(model):
    """The Hugging Face directories of `model` (`ModelFamily.hf_folders`): for the pre-training
    model, the discriminator with its head (`ElectraForPreTraining`) and in `generator/` the
    generator with its head and a copy of the shared tables (`ElectraForMaskedLM`, its decoder
    left to transformers' tying to the word embeddings, as it saves it); None for the others
    (the encoder as `ElectraModel`)."""
    if not isinstance(model, ElectraPretrainer):
        return None
    config, encoder = model.config, encoder_variable_map(model.encoder)
    _check_generator_activation(config, "the ELECTRA pre-training model")
    discriminator = ELECTRA.hf_tensors(encoder + model.discriminator_predictions.original_names(
        "discriminator_predictions"))
    tables = [(name, var) for name, var in encoder if name.startswith(_TABLES)]
    own = [(f"{SCOPE}/{name[len(_GENERATOR_SCOPE) + 1:]}"
            if name.startswith(f"{_GENERATOR_SCOPE}/") else name, var)
           for name, var in model.generator_names()]
    generator_config = {key: value for key, value in config_to_hf(model.generator.config).items()
                        if key not in _GENERATOR_KEYS}
    return [("", {**config_to_hf(config), "architectures": [_DISCRIMINATOR]}, discriminator),
            (GENERATOR_FOLDER, {**generator_config, "architectures": [_GENERATOR]},
             ELECTRA.hf_tensors(tables + own))]


# The fine-tuned models as transformers' classes (`ModelFamily.hf_heads`), or why there is none.
# ElectraForMultipleChoice summarises a choice by its first token with no projection and no
# activation when config.json says so (its SequenceSummary), as the original's head reads it.
_NO_CLASSIFIER = (
    "the original ELECTRA's classifier (dropout and one dense layer on the first token) is not "
    "ElectraForSequenceClassification's head (classifier.dense, GELU, classifier.out_proj), "
    "which cannot compute it exactly")
HF_HEADS = {
    "classifier": _NO_CLASSIFIER,
    "multi_label": _NO_CLASSIFIER,
    "span": ("the original ELECTRA's SQuAD head (start, then end given the start, and an "
             "answerability logit) is not ElectraForQuestionAnswering's single qa_outputs layer"),
    "token": dataclasses.replace(bert.HF_HEADS["token"],
                                 architecture="ElectraForTokenClassification"),
    "multiple_choice": dataclasses.replace(
        bert.HF_HEADS["multiple_choice"], architecture="ElectraForMultipleChoice",
        config={"summary_type": "first", "summary_use_proj": False, "summary_activation": "linear",
                "summary_last_dropout": 0.1}),
}


def layerwise_lr_decay(config):
    """The original's fine-tuning default: 0.8, 0.9 for ELECTRA-Large."""
    return LARGE_LAYERWISE_LR_DECAY if config.hidden_size >= _LARGE_HIDDEN_SIZE else \
        LAYERWISE_LR_DECAY


ELECTRA = ModelFamily(
    name="electra",
    config_class=ElectraConfig,
    claims_config=claims_config,
    config_from_file=config_from_file,
    models={"encoder": ElectraModel, "pretrainer": ElectraPretrainer,
            "classifier": ElectraClassifier, "multi_label": ElectraMultiLabelClassifier,
            "span": ElectraSquadModel, "multiple_choice": ElectraMultipleChoice,
            "token": ElectraTokenClassifier, "sentence_encoder": ElectraSentenceEncoder},
    encoder_names=encoder_variable_map,
    original_scope=SCOPE,
    hf_model_types=("electra",),
    hf_name=hf_name,
    original_name=original_name,
    normalise_hf_names=normalise_hf_names,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    hf_encoder_prefix=f"{SCOPE}.",
    warmup_rule="electra",
    layerwise_lr_decay=layerwise_lr_decay,
    config_from_checkpoint=ElectraConfig.from_original_shapes,
    config_file="--hparams JSON",
    read_hf=read_hf,
    hf_folders=hf_folders,
    hf_heads=HF_HEADS,
)
