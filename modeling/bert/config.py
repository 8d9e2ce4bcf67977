"""`BertConfig`: the model hyper-parameters, read and written in the original `bert_config.json` format."""
import copy
import json
import os

from modeling.json_file import read_required_json_object

# Activation names a config may use. "gelu" is the original release's tanh approximation;
# "gelu_exact" is the erf form that Hugging Face checkpoints were trained with.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")

# The keys of every released bert_config.json.
REQUIRED_KEYS = (
    "attention_probs_dropout_prob",
    "hidden_act",
    "hidden_dropout_prob",
    "hidden_size",
    "initializer_range",
    "intermediate_size",
    "max_position_embeddings",
    "num_attention_heads",
    "num_hidden_layers",
    "type_vocab_size",
    "vocab_size",
)

# `"pretraining_objective"`, a key this project adds (absent from the original's files): how the
# checkpoint was pre-trained, and so how its encoder attends. Absent or "mlm": bidirectional
# self-attention (the original's masked LM, with or without next sentence prediction); "ltr": a
# left-to-right language model (the paper's "LTR & No NSP" ablation, Table 5), whose position i
# attends to positions 0..i only, in pre-training and in every script that loads it.
PRETRAINING_OBJECTIVES = ("mlm", "ltr")
OBJECTIVE_KEY = "pretraining_objective"

_POSITIVE_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


class ConfigNeeded(ValueError):
    """A checkpoint without a config whose shapes do not give one (`ModelFamily
    .config_from_checkpoint`): the config it was trained with is needed."""


class BertConfig:
    """Configuration of a `BertModel`, field for field the original `modeling.BertConfig`.

    Unknown keys read from a JSON file are kept as attributes and written back unchanged, so a
    config round-trips through this class byte for byte.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a dict; every key is kept, missing keys take the defaults."""
        config = cls(vocab_size=None)
        for key, value in json_object.items():
            config.__dict__[key] = value
        return config

    @classmethod
    def from_json_file(cls, json_file):
        """Reads a `bert_config.json`; errors name the file."""
        return cls.from_file_dict(read_required_json_object(json_file, "BERT config file"),
                                  json_file)

    @classmethod
    def from_file_dict(cls, data, json_file):
        """The config of `data`, the dict of the `bert_config.json` at `json_file`: every key of
        the original's there, each valid; errors name the file."""
        missing = [key for key in REQUIRED_KEYS if key not in data]
        if missing:
            # The original's from_dict falls back to BERT-Base values for a missing key (12
            # layers for a 2-layer checkpoint), which then trains most of the model from random.
            raise ValueError(f"{json_file}: missing key(s) {', '.join(missing)}; a "
                             "bert_config.json holds all of " + ", ".join(REQUIRED_KEYS))
        config = cls.from_dict(data)
        config.validate(source=json_file)
        return config

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    @property
    def pretraining_objective(self):
        """`"mlm"` or `"ltr"` (`PRETRAINING_OBJECTIVES`); a config without the key is "mlm"."""
        return self.__dict__.get(OBJECTIVE_KEY) or "mlm"

    @property
    def causal(self):
        """Whether the encoder's self-attention is causal (position i sees 0..i): an LTR model."""
        return self.pretraining_objective == "ltr"

    def with_objective(self, objective):
        """A copy pre-trained with `objective`: "ltr" records the key; "mlm" leaves the config
        as the original writes it (the key removed)."""
        config = copy.deepcopy(self)
        config.__dict__.pop(OBJECTIVE_KEY, None)
        if objective != "mlm":
            config.__dict__[OBJECTIVE_KEY] = objective
        return config.validate()

    def to_json_string(self):
        """The original on-disk format: keys sorted, 2-space indent, trailing newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file):
        """Writes the config atomically (temporary name, then rename)."""
        tmp = f"{json_file}.tmp"
        with open(tmp, "w", encoding="utf-8") as writer:
            writer.write(self.to_json_string())
        os.replace(tmp, json_file)

    def validate(self, source="BertConfig"):
        """Raises ValueError naming every invalid field (the original fails late or silently)."""
        problems = []
        for name in _POSITIVE_INT_FIELDS:
            value = getattr(self, name, None)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        hidden, heads = self.hidden_size, self.num_attention_heads
        if not problems and hidden % heads != 0:
            problems.append(
                f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads})"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name, None)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                problems.append(f"{name} must be in [0, 1), got {value!r}")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            problems.append(f"initializer_range must be positive, got {self.initializer_range!r}")
        act = self.hidden_act
        if act not in (None, "") and (
            not isinstance(act, str) or act.lower() not in SUPPORTED_ACTIVATIONS
        ):
            problems.append(
                f"hidden_act {act!r} is not supported; use one of {', '.join(SUPPORTED_ACTIVATIONS)}"
            )
        objective = self.__dict__.get(OBJECTIVE_KEY)
        if objective is not None and objective not in PRETRAINING_OBJECTIVES:
            problems.append(f"{OBJECTIVE_KEY} {objective!r} is not one of "
                            f"{', '.join(PRETRAINING_OBJECTIVES)}")
        if problems:
            raise ValueError(f"Invalid BERT config ({source}): " + "; ".join(problems))
        return self

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.__dict__ == other.__dict__

    def __repr__(self):
        return f"BertConfig({self.to_dict()!r})"
