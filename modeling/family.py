"""The model-family contract: what a kind of encoder declares, so that the checkpoint package,
the optimizer and the tasks serve it without naming it.

A family is a subclass of `ModelFamily` (`modeling.bert.family.BertFamily`,
`modeling.electra.family.ElectraFamily`, which extends BERT's) and one instance of it (`BERT`,
`ELECTRA`): class attributes for what it is (its config class, its models by kind, its scope),
the abstract methods for its variables' names and its config files, and overrides of the
defaults where it differs. This module imports no family and no checkpoint code: both import
it, and `modeling.families` lists the families (docs/adding_a_model_family.md).
"""
import abc
import dataclasses
from typing import Any, Callable, ClassVar, Mapping, Optional, Union

import numpy as np

# The kinds of model a family builds, the keys of `ModelFamily.models`, with the arguments each
# takes after the config:
#   "encoder"          the bare encoder (sequence and pooled output)
#   "pretrainer"       the pre-training heads
#   "classifier"       (num_labels): one label per sequence (softmax, or regression with 1)
#   "multi_label"      (num_labels): independent sigmoids per sequence
#   "span"             SQuAD's start and end logits
#   "multiple_choice"  (num_choices): SWAG's one score per choice
#   "token"            (num_labels): one label per token (NER)
#   "sentence_encoder" (pooling, normalize): one vector per text (sentence embeddings)
MODEL_KINDS = ("encoder", "pretrainer", "classifier", "multi_label", "span", "multiple_choice",
               "token", "sentence_encoder")

# A model's variables under their names in the original layout, `[(original name, variable)]`.
Names = list[tuple[str, Any]]
# `{name: array}`: a checkpoint's arrays by name.
Tensors = Mapping[str, np.ndarray]


class NoHfClass(ValueError):
    """A task model transformers has no class for (its family's `hf_heads` says why)."""


@dataclasses.dataclass(frozen=True)
class HfHead:
    """A task model's head as the transformers class that computes it (`ModelFamily.hf_heads`).

    architecture: the class ("BertForSequenceClassification"), config.json's `architectures`.
    names: `{original head name: Hugging Face name}`; the arrays are the same (output layers,
      `[out, in]` in both layouts).
    zeros: `{Hugging Face name: shape}` the class holds and the model has not (a bias that
      cancels in the softmax): written as zeros, read back as nothing.
    pooler: whether the class holds the encoder's pooler (transformers' token and span classes
      have none).
    problem_type: `num_labels -> config.json's "problem_type"` (None: none written); also how
      a directory of an architecture several heads share is told apart when read.
    labels: whether config.json names its outputs (`id2label`, `label2id`).
    config: config.json keys the class needs to compute the model's outputs.
    """

    architecture: str
    names: Mapping[str, str]
    zeros: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    pooler: bool = True
    problem_type: Callable = lambda num_labels: None
    labels: bool = False
    config: Mapping[str, object] = dataclasses.field(default_factory=dict)


class ModelFamily(abc.ABC):
    """One model family, as the checkpoint package, the optimizer and the tasks see it.

    A subclass sets the class attributes without a default, implements the abstract methods and
    overrides the other methods where its original differs. A "config" is an instance of its
    `config_class`; "original names" are the variables' names in the original TF1 checkpoint
    ("bert/encoder/layer_0/attention/self/query/kernel"); Hugging Face names are those of the
    transformers class's state dict ("bert.encoder.layer.0.attention.self.query.weight").
    """

    name: ClassVar[str]
    """The family's name ("bert"), recorded in run.json (`"family"`), found by `families.get`."""
    config_class: ClassVar[type]
    """Its config (`BertConfig`): a config's family is that of its class (`families.of_config`)."""
    models: ClassVar[Mapping[str, Callable]]
    """`{kind: callable(config, *args, **options) -> keras.Model}` for every `MODEL_KINDS` kind
    it serves; its task models name their heads' original variables (`tf1_head_variables()`)."""
    original_scope: ClassVar[str]
    """The scope of the encoder's original names ("bert"): a checkpoint holding
    `<scope>/embeddings/word_embeddings` is of this family (`holds_encoder`)."""
    hf_model_types: ClassVar[tuple]
    """The `model_type` values of the Hugging Face `config.json` files it reads."""
    warmup_rule: ClassVar[str] = "bert"
    """The learning-rate warm-up its original code trains with (`modeling.optimization
    .WARMUP_RULES`): "bert" (linear warm-up, then the decay counted from step 0) or "electra"
    (the decay times min(1, step / warm-up steps))."""
    config_file: ClassVar[str] = "bert_config.json"
    """What its users call its config file, in messages (ELECTRA's: "hparams JSON"); every
    family's scripts take it as the original's --bert_config_file."""
    config_from_checkpoint: ClassVar[Optional[Callable]] = None
    """`({original name: shape}, source) -> config` for a family whose released checkpoints
    come without a config file (ELECTRA's), `source` named in errors (`ConfigNeeded` where the
    shapes do not give one); None: they come with one."""
    hf_heads: ClassVar[Mapping[str, Union[HfHead, str]]] = {}
    """`{kind: HfHead or str}`: the transformers class of each fine-tuned kind of model, which
    `write_hugging_face` writes with its head and the reader reads back by its `architectures`;
    a str says why transformers has no class for that kind (the refusal `hf_head` raises). A
    kind absent: no class either."""

    def __init_subclass__(cls, **kwargs):
        # Checked where the class is defined: a family's kinds fail at import, not at a task's
        # first `build_model` of another kind.
        super().__init_subclass__(**kwargs)
        unknown = sorted(set(getattr(cls, "models", {})) - set(MODEL_KINDS))
        if unknown:
            raise ValueError(f"the {cls.name} family declares models of unknown kinds {unknown} "
                             f"(kinds: {', '.join(MODEL_KINDS)})")

    # What each family supplies: its config files and its variables' names.

    @abc.abstractmethod
    def claims_config(self, data: Mapping[str, Any]) -> bool:
        """Whether the dict of a config file (not a Hugging Face `config.json`) is this
        family's (BERT's: it holds every key of `bert_config.json`)."""

    @abc.abstractmethod
    def config_from_dict(self, data: Mapping[str, Any], path: str) -> Any:
        """The config of `data`, the dict of the config file at `path` (one `claims_config`
        claims); errors name the file."""

    @abc.abstractmethod
    def config_from_hf(self, hf: Mapping[str, Any], path: str) -> Any:
        """The config of the dict `hf` of a Hugging Face `config.json` at `path`; ValueError
        naming `path` for what the family cannot model."""

    @abc.abstractmethod
    def config_to_hf(self, config: Any) -> dict:
        """The `config.json` dict transformers reads for the bare encoder of `config`."""

    @abc.abstractmethod
    def encoder_names(self, encoder: Any) -> Names:
        """`[(original name, variable)]` of the family's encoder, in the original's creation
        order."""

    @abc.abstractmethod
    def hf_name(self, original_name: str) -> tuple:
        """Original name -> (Hugging Face name, whether the array is transposed: a dense kernel
        is `[in, out]` in TF1 and `[out, in]` in PyTorch)."""

    @abc.abstractmethod
    def original_name(self, hf_name: str) -> tuple:
        """Hugging Face name -> (original name, whether the array is transposed): `hf_name`
        inverted."""

    @abc.abstractmethod
    def normalise_hf_names(self, tensors: Tensors) -> dict:
        """`{name: array}` as saved (with or without the model prefix, older names) ->
        `{Hugging Face name: array}` of the names `original_name` inverts, without the entries
        that duplicate tied or constant state."""

    # Defaults: what a family overrides where its original differs.

    @property
    def hf_encoder_prefix(self) -> str:
        """The prefix the bare encoder's Hugging Face names are saved without ("bert.")."""
        return f"{self.original_scope}."

    def layerwise_lr_decay(self, config: Any) -> float:
        """The layer-wise learning-rate decay its original fine-tuning uses by default for
        `config` (1.0: none)."""
        return 1.0

    def read_hf(self, location: str, model: Any, read: Callable[[str], dict]) -> dict:
        """`{original name: array}` of the Hugging Face checkpoint at `location` (a directory,
        or a weights file with its `config.json` beside it) as `model` loads it; `read(path)` is
        the `{original name: array}` of one directory or weights file by the family's names
        (`hugging_face.read_hf_as_tf1`). A family whose checkpoints are more than one directory
        adds its companion folders here, and refuses (ValueError naming the files) what `model`
        cannot start from. Default: `read(location)`."""
        return read(location)

    def hf_folders(self, model: Any) -> Optional[list]:
        """`[(folder, config.json dict, {Hugging Face name: array as saved})]`: the Hugging Face
        directories `write_hugging_face` writes for `model`, folder "" the directory itself and
        others below it; None (the default) for the encoder alone, as the bare model saves it
        (names without `hf_encoder_prefix`, `config_to_hf` of its config)."""
        return None

    # Derived from the declaration.

    def build(self, kind: str, config: Any, *args, **options):
        """The family's `kind` model of `config` (see `MODEL_KINDS`)."""
        if kind not in self.models:
            raise ValueError(f"the {self.name} family has no {kind!r} model (it builds "
                             f"{', '.join(self.models)})")
        return self.models[kind](config, *args, **options)

    def kind_of(self, model) -> Optional[str]:
        """The `MODEL_KINDS` kind of `model` (one of this family's models), or None."""
        return next((kind for kind, built in self.models.items() if type(model) is built), None)

    def hf_head(self, model) -> HfHead:
        """The `HfHead` of the task model `model`; raises `NoHfClass` saying why transformers
        has none for it (its kind's refusal, a BiLSTM on top)."""
        kind = self.kind_of(model)
        head = self.hf_heads.get(kind)
        if getattr(model, "bilstm", None) is not None:
            head = ("a BiLSTM on top of the encoder (--bilstm_on_top), which no transformers "
                    "class has")
        if not isinstance(head, HfHead):
            raise NoHfClass(f"transformers has no class for the {self.name.upper()} {kind} "
                            f"model: {head or 'no head of that kind'}")
        return head

    def head_of_hf_config(self, hf: Mapping[str, Any]) -> Optional[HfHead]:
        """The `HfHead` a Hugging Face `config.json` (dict) names by its `architectures` (and
        `problem_type`, where heads share a class), or None (a bare model, a pre-training one,
        or the class configured to compute another head than ours: ELECTRA's multiple choice
        with a projection)."""
        architectures = hf.get("architectures") or ()
        num_labels = len(hf.get("id2label") or {}) or 2
        heads = [h for h in self.hf_heads.values()
                 if isinstance(h, HfHead) and h.architecture in architectures
                 and all(hf.get(key) == value for key, value in h.config.items())]
        return next((h for h in heads if h.problem_type(num_labels) == hf.get("problem_type")),
                    heads[0] if heads else None)

    def hf_tensors(self, names: Names) -> dict:
        """`{Hugging Face name: float32 array as saved}` of `[(original name, variable)]` by the
        family's names (`hf_name`; kernels transposed to PyTorch's `[out, in]`)."""
        tensors = {}
        for name, var in names:
            hf, transpose = self.hf_name(name)
            value = np.asarray(var, dtype=np.float32)
            tensors[hf] = value.T if transpose else value
        return tensors

    def config_named(self, config_file: Optional[str] = None) -> str:
        """How a message names the config a model was built from: `config_file` when known,
        else "its <config_file>"."""
        return str(config_file) if config_file else f"its {self.config_file}"

    def holds_encoder(self, names) -> bool:
        """Whether original-layout `names` hold this family's encoder."""
        return f"{self.original_scope}/embeddings/word_embeddings" in names
