"""`ElectraConfig`: an ELECTRA model's hyper-parameters (Clark et al. 2020, google-research/electra).

ELECTRA's encoder is BERT's (`modeling.BertConfig`'s fields: the discriminator) plus
`embedding_size`, the width of its embedding tables, projected to `hidden_size` by
`embeddings_project` when the two differ, and its generator's size as fractions of the
discriminator's (`generator_hidden_size`, `generator_layers`). The original has no config file:
its sizes come from a model-size table (`MODEL_SIZES`) and the `--hparams` JSON of its
`run_pretraining.py` (`from_hparams`), or, for the released checkpoints, from the table checked
against the checkpoint's shapes (`from_original_shapes`). This project writes the resolved
config as a `bert_config.json` with the three ELECTRA keys added (`to_json_string`).

The original ELECTRA's `"gelu"` is the exact erf GELU (its `modeling.gelu`), which this project
names `"gelu_exact"` (its `"gelu"` is the original BERT's tanh form).
"""
import copy

from absl import logging

from modeling.bert.config import REQUIRED_KEYS, BertConfig, ConfigNeeded

# util/training_utils.get_bert_config: (hidden_size, num_hidden_layers) by model size.
MODEL_SIZES = {"small": (256, 12), "base": (768, 12), "large": (1024, 24)}
# configure_pretraining.PretrainingConfig: the small model's embedding width (the others: hidden).
SMALL_EMBEDDING_SIZE = 128
# The keys this project adds to a bert_config.json for ELECTRA.
ELECTRA_KEYS = ("embedding_size", "generator_hidden_size", "generator_layers")
# Every hparam of the original's PretrainingConfig: a `--hparams` JSON holds some of them.
PRETRAINING_HPARAMS = frozenset((
    "debug", "do_train", "do_eval", "electra_objective", "electric_objective", "gen_weight",
    "disc_weight", "mask_prob", "learning_rate", "lr_decay_power", "weight_decay_rate",
    "num_warmup_steps", "iterations_per_loop", "save_checkpoints_steps", "num_train_steps",
    "num_eval_steps", "keep_checkpoint_max", "model_size", "model_hparam_overrides",
    "embedding_size", "vocab_size", "do_lower_case", "uniform_generator", "two_tower_generator",
    "untied_generator_embeddings", "untied_generator", "generator_layers",
    "generator_hidden_size", "disallow_correct", "temperature", "max_seq_length",
    "train_batch_size", "eval_batch_size", "use_tpu", "num_tpu_cores", "tpu_job_name",
    "tpu_name", "tpu_zone", "gcp_project", "pretrain_tfrecords", "vocab_file", "model_dir",
    "results_txt", "results_pkl"))
# Of those, the ones that describe the model (the rest are run_pretraining.py's flags here).
_MODEL_HPARAMS = ("model_size", "model_hparam_overrides", "embedding_size", "vocab_size",
                  "generator_layers", "generator_hidden_size")
# Generator variants of the original this project does not build.
_UNSUPPORTED = {"uniform_generator": False, "two_tower_generator": False,
                "untied_generator_embeddings": False, "untied_generator": True,
                "electric_objective": False, "electra_objective": True}
# The original's activation names as this project's (`modeling.layers.activations`).
_ACTIVATIONS = {"gelu": "gelu_exact", "relu": "relu", "tanh": "tanh", "linear": "linear"}


class ElectraConfig(BertConfig):
    """An ELECTRA discriminator's `BertConfig` plus `embedding_size` (int) and the generator's
    `generator_hidden_size` and `generator_layers` (fractions of the discriminator's)."""

    def __init__(self, vocab_size, embedding_size=None, generator_hidden_size=0.25,
                 generator_layers=1.0, **bert):
        bert.setdefault("hidden_act", "gelu_exact")
        bert.setdefault("type_vocab_size", 2)
        super().__init__(vocab_size, **bert)
        self.embedding_size = embedding_size or self.hidden_size
        self.generator_hidden_size = generator_hidden_size
        self.generator_layers = generator_layers

    @classmethod
    def from_dict(cls, json_object):
        config = cls(vocab_size=None)
        config.__dict__.update(json_object)
        if json_object.get("embedding_size") is None:
            config.embedding_size = config.hidden_size
        return config

    @classmethod
    def from_bert(cls, config, **electra):
        """An ELECTRA config whose discriminator is the BERT `config`'s model."""
        return cls.from_dict({**config.to_dict(), **electra}).validate()

    @classmethod
    def from_hparams(cls, hparams, source="the hparams"):
        """The model of the original `run_pretraining.py --hparams` JSON: `PretrainingConfig`'s
        defaults and size rules, `training_utils.get_bert_config`. Unknown keys, and generator
        variants this project does not build, are refused naming `source`."""
        unknown = sorted(set(hparams) - PRETRAINING_HPARAMS)
        if unknown:
            raise ValueError(f"{source}: unknown ELECTRA hparam(s) {', '.join(unknown)} (the "
                             "original's configure_pretraining.PretrainingConfig has none of them)")
        for key, supported in _UNSUPPORTED.items():
            if key in hparams and hparams[key] != supported:
                raise ValueError(f"{source}: {key}={hparams[key]!r} is not built here (ELECTRA's "
                                 f"separate small generator only: {key}={supported})")
        settings = sorted(set(hparams) - set(_MODEL_HPARAMS) - set(_UNSUPPORTED))
        if settings:
            logging.warning("%s: %s set(s) how to pre-train, not the model: ignored here, where "
                            "run_pretraining.py's flags say it", source, ", ".join(settings))
        size = hparams.get("model_size", "small")
        if size not in MODEL_SIZES:
            raise ValueError(f"{source}: model_size {size!r} is not one of "
                             f"{', '.join(MODEL_SIZES)}")
        overrides = hparams.get("model_hparam_overrides") or {}
        if not isinstance(overrides, dict):
            raise ValueError(f"{source}: model_hparam_overrides must be a JSON object")
        hidden, layers = MODEL_SIZES[size]
        args = {"hidden_size": hidden, "num_hidden_layers": layers,
                "vocab_size": hparams.get("vocab_size", 30522), **overrides}
        # get_bert_config: heads and feed-forward width follow the (overridden) hidden size,
        # unless overridden themselves.
        if isinstance(args["hidden_size"], int):  # else `validate` names it
            args.setdefault("num_attention_heads", max(1, args["hidden_size"] // 64))
            args.setdefault("intermediate_size", 4 * args["hidden_size"])
        act = args.get("hidden_act", "gelu")
        if act not in _ACTIVATIONS:
            raise ValueError(f"{source}: hidden_act {act!r} is not one of the original's "
                             f"{', '.join(_ACTIVATIONS)}")
        args["hidden_act"] = _ACTIVATIONS[act]
        embedding = hparams.get("embedding_size")
        if embedding is None and size == "small":
            embedding = SMALL_EMBEDDING_SIZE
        config = cls(embedding_size=embedding,
                     generator_hidden_size=hparams.get("generator_hidden_size", 0.25),
                     generator_layers=hparams.get("generator_layers", 1.0), **args)
        return config.validate(source=source)

    @classmethod
    def from_original_shapes(cls, shapes, source):
        """The config of a released ELECTRA checkpoint (`{original name: shape}`), which comes
        without one: its sizes read from the shapes, its heads (hidden / 64) and feed-forward
        width (4 x hidden) by the original's rules, checked against `MODEL_SIZES`;
        `ConfigNeeded` naming `source` for another size (its hparams JSON is then needed)."""
        def shape(name):
            if name not in shapes:
                raise ValueError(f"{source}: holds no {name}: not an ELECTRA checkpoint")
            return list(shapes[name])

        def layers(scope):
            return len({n.split("/")[2] for n in shapes if n.startswith(f"{scope}/encoder/layer_")})

        vocab, embedding = shape("electra/embeddings/word_embeddings")
        hidden = shape("electra/encoder/layer_0/attention/self/query/kernel")[1]
        num_layers = layers("electra")
        size = next((s for s, dims in MODEL_SIZES.items() if dims == (hidden, num_layers)), None)
        if size is None:
            raise ConfigNeeded(
                f"{source}: hidden size {hidden} with {num_layers} layers is none of the released "
                f"ELECTRA sizes ({', '.join(f'{s} {h}x{n}' for s, (h, n) in MODEL_SIZES.items())})")
        generator_hidden = shape("generator/encoder/layer_0/attention/self/query/kernel")[1]
        config = cls(
            vocab, embedding_size=embedding, hidden_size=hidden, num_hidden_layers=num_layers,
            num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
            max_position_embeddings=shape("electra/embeddings/position_embeddings")[0],
            type_vocab_size=shape("electra/embeddings/token_type_embeddings")[0],
            generator_hidden_size=generator_hidden / hidden,
            generator_layers=layers("generator") / num_layers)
        feed_forward = shape("electra/encoder/layer_0/intermediate/dense/kernel")[1]
        if feed_forward != config.intermediate_size:
            raise ConfigNeeded(f"{source}: intermediate size {feed_forward} is not the "
                                   f"{size} model's {config.intermediate_size}")
        return config.validate(source=source)

    def generator_config(self):
        """The generator's `BertConfig` (run_pretraining.get_generator_config): hidden size and
        layers as fractions of the discriminator's, rounded; heads hidden / 64 (at least 1),
        feed-forward 4 x hidden; the embedding width is the discriminator's (shared tables)."""
        config = copy.deepcopy(self)
        config.hidden_size = int(round(self.hidden_size * self.generator_hidden_size))
        config.num_hidden_layers = int(round(self.num_hidden_layers * self.generator_layers))
        config.intermediate_size = 4 * config.hidden_size
        config.num_attention_heads = max(1, config.hidden_size // 64)
        config.generator_hidden_size = config.generator_layers = 1.0  # its own sizes
        return config.validate(source="the generator of " + repr(self))

    def validate(self, source="ElectraConfig"):
        super().validate(source)
        problems = []
        embedding = self.embedding_size
        if isinstance(embedding, bool) or not isinstance(embedding, int) or embedding <= 0:
            problems.append(f"embedding_size must be a positive integer, got {embedding!r}")
        for name in ("generator_hidden_size", "generator_layers"):
            value = getattr(self, name, None)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                problems.append(f"{name} must be a positive fraction, got {value!r}")
        if not problems:
            hidden = int(round(self.hidden_size * self.generator_hidden_size))
            layers = int(round(self.num_hidden_layers * self.generator_layers))
            heads = max(1, hidden // 64)  # as `generator_config` gives it
            if hidden < 1 or layers < 1:
                problems.append(f"the generator would have hidden size {hidden} and {layers} "
                                "layers: generator_hidden_size and generator_layers too small")
            elif hidden % heads:
                problems.append(
                    f"the generator would be {hidden} wide (generator_hidden_size "
                    f"{self.generator_hidden_size:g} of hidden_size {self.hidden_size}) with "
                    f"{heads} heads (one per 64), and {hidden} is not a multiple of {heads}: "
                    "choose generator_hidden_size so that its width is")
        if problems:
            raise ValueError(f"Invalid ELECTRA config ({source}): " + "; ".join(problems))
        return self

    @property
    def pretraining_objective(self):
        """"electra": replaced-token detection (every ELECTRA model's; its attention is
        bidirectional, `causal` False)."""
        return "electra"

    def with_objective(self, objective):
        """ELECTRA is pre-trained with replaced-token detection only: the config as it is."""
        return copy.deepcopy(self)

    def __eq__(self, other):
        return isinstance(other, ElectraConfig) and self.__dict__ == other.__dict__

    def __repr__(self):
        return f"ElectraConfig({self.to_dict()!r})"


def claims_config(data):
    """Whether the dict of a config file is ELECTRA's: the original's `--hparams` JSON (only
    `PretrainingConfig` keys, at least one describing the model) or this project's
    bert_config.json with the ELECTRA keys."""
    if _is_bert_config_form(data):
        return True
    if data and set(data) <= PRETRAINING_HPARAMS and any(k in data for k in _MODEL_HPARAMS):
        return True
    # An --hparams JSON with a key the original does not know (read, and refused, as one).
    return not all(key in data for key in REQUIRED_KEYS) and any(
        key in data for key in _MODEL_HPARAMS if key != "vocab_size")


def _is_bert_config_form(data):
    """Whether `data` is this project's form: every key of bert_config.json and ELECTRA's."""
    return all(key in data for key in ELECTRA_KEYS + REQUIRED_KEYS)


def config_from_dict(data, path):
    """The `ElectraConfig` of `data`, the dict of the config file at `path`: an original
    `--hparams` JSON or this project's bert_config.json of an ELECTRA run; errors name the
    file."""
    if _is_bert_config_form(data):
        return ElectraConfig.from_dict(data).validate(source=path)
    return ElectraConfig.from_hparams(data, source=path)
