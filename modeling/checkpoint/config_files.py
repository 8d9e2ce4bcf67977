"""A checkpoint's config file, read by its family: the original's `bert_config.json` or a
Hugging Face `config.json` (the config of a run's starting point is chosen from its flags by
`bert_runner.runs.model_files`).
"""
from modeling import families
from modeling.checkpoint import hugging_face
from modeling.json_file import read_required_json_object

# The config keys that decide a model's outputs: a config file given with a Hugging Face
# directory must agree on these (dropout rates may differ: they only change training).
_ARCHITECTURE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "type_vocab_size",
                      "hidden_act")
# Keys only a Hugging Face config.json has (the original's bert_config.json has none of them).
_HF_CONFIG_KEYS = ("model_type", "architectures", "transformers_version")


def architecture_differences(given, config):
    """The architecture keys on which the config `given` differs from `config`, each as
    "<key> <given's value> vs <config's>"; empty when they describe the same model."""
    return [f"{key} {getattr(given, key)!r} vs {getattr(config, key)!r}"
            for key in _ARCHITECTURE_KEYS if getattr(given, key) != getattr(config, key)]


def load_config(bert_config_file, max_seq_length=None):
    """Reads and validates a model's config file by its family; checks `max_seq_length` fits its
    positions.

    A Hugging Face `config.json` (it has `model_type`, `architectures` or
    `transformers_version`) is read as one, by its family (`hugging_face.read_config`): for
    BERT its `"gelu"` is the exact erf GELU, where the original's `"gelu"` is the tanh form.
    Any other file is read by the family that claims it (`families.of_config_file`: the
    original's `bert_config.json` is BERT's)."""
    data = read_required_json_object(bert_config_file, "config file")
    if any(key in data for key in _HF_CONFIG_KEYS):
        config = hugging_face.config_from_dict(data, bert_config_file)
    else:
        config = families.of_config_file(data).config_from_dict(data, bert_config_file)
    check_max_seq_length(config, max_seq_length, bert_config_file)
    return config


def check_max_seq_length(config, max_seq_length, bert_config_file):
    """Refuses a `max_seq_length` (None: not checked) beyond the config's positions, in the
    original's words, naming the config's family ("the ELECTRA model")."""
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        family = families.of_config(config).name.upper()
        raise ValueError(
            f"Cannot use sequence length {max_seq_length} because the {family} model was only "
            f"trained up to sequence length {config.max_position_embeddings} ({bert_config_file})"
        )
