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
"""
import re

from modeling.checkpoint_names import encoder_names
from modeling.electra_config import ElectraConfig, claims_config, config_from_file
from modeling.electra_model import ElectraModel
from modeling.electra_pretrainer import ElectraPretrainer
from modeling.electra_task_models import (
    ElectraClassifier, ElectraMultiLabelClassifier, ElectraMultipleChoice, ElectraSentenceEncoder,
    ElectraSpanLabeler, ElectraTokenClassifier)
from modeling.families import ModelFamily, bert, register

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
    """An `ElectraConfig` from the dict of a Hugging Face ELECTRA `config.json` at `path`."""
    return bert.config_from_hf(hf, path, ElectraConfig, bert.CONFIG_KEYS + ("embedding_size",),
                               "ELECTRA")


def config_to_hf(config):
    """The Hugging Face `config.json` dict of an `ElectraConfig` (`transformers.ElectraModel`)."""
    return {**bert.config_to_hf(config), "architectures": ["ElectraModel"],
            "model_type": "electra", "embedding_size": config.embedding_size,
            "summary_type": "first"}


def layerwise_lr_decay(config):
    """The original's fine-tuning default: 0.8, 0.9 for ELECTRA-Large."""
    return LARGE_LAYERWISE_LR_DECAY if config.hidden_size >= _LARGE_HIDDEN_SIZE else \
        LAYERWISE_LR_DECAY


ELECTRA = register(ModelFamily(
    name="electra",
    config_class=ElectraConfig,
    claims_config=claims_config,
    config_from_file=config_from_file,
    models={"encoder": ElectraModel, "pretrainer": ElectraPretrainer,
            "classifier": ElectraClassifier, "multi_label": ElectraMultiLabelClassifier,
            "span": ElectraSpanLabeler, "multiple_choice": ElectraMultipleChoice,
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
))
