"""The serving formats: what each kind of export is, declared by whoever owns it.

A task that serves its models declares one `ServingFormat` in its own package (its `serving`
module; the raw-text graph in its `raw_text` module, beside the Python code it mirrors) and
registers it on import; the machinery's own formats (`formats`: embedding, huggingface, litert,
onnx) register the same way. Declarations load no TensorFlow (an export imports its graph when it
runs), so export_model.py lists the formats before it parses its flags.
`export_model.py` and `predict.py` find every format here, one way:

    registry.get("squad").export(export_config, files)   # export_model.py --format=squad
    registry.get(metadata["format"]).answer(call, rows, metadata)   # predict.py

Nothing in this package imports a task: the scripts (export_model.py, predict.py) import the
tasks' declarations before they look a format up.
"""
import dataclasses
import importlib
from typing import Callable, Optional, Tuple

_FORMATS = {}
# The formats that export a run_classifier model, named by its --task_name (litert and onnx
# also convert a pooled encoder, which has none).
CLASSIFIER_FORMATS = ("classifier", "litert", "onnx")


@dataclasses.dataclass(frozen=True)
class Convertible:
    """A model export_model.py --format=litert or onnx converts (LiteRT: a classifier or an
    encoder; ONNX: every task's).

    Attributes:
      model: the Keras model with its weights (converted on a reference-kernel copy).
      metadata: JSON-able settings written to export.json (labels, pooling, normalize).
      text_module: (model, tokenizer, max_seq_length) -> the raw-text `ModelExport` LiteRT
        converts, built with `rows_per_call=1` (one text a call, on the static-shape grid).
      ids_outputs: (model, features: dict of int32 [N, T] `input_ids`, `input_mask`,
        `token_type_ids`) -> dict of outputs: the ONNX graph, token ids in.
      ids_shape: the features' shape (None: any): [N, T], a multiple-choice model's [N, C, T],
        SQuAD's windows [N, max_seq_length] (ELECTRA's beams need a static length).
      litert_ids: LiteRT converts the graph on ids (one row a call), not the raw-text module
        (NER's: its regular-expression ops have no LiteRT kernels).
    """
    model: object
    metadata: dict
    text_module: Callable
    ids_outputs: Callable
    ids_shape: Tuple[Optional[int], ...] = (None, None)
    litert_ids: bool = False


@dataclasses.dataclass(frozen=True)
class ServingFormat:
    """One value of export_model.py's --format and of export.json's `format`.

    Attributes:
      name: the --format value (and `ModelExport.format` of its raw-text module).
      help: what it exports, for --format's help.
      export: (export_config: `export_config.ExportConfig`, files:
        `modeling.checkpoint.ModelFiles`) -> None, export_model.py's export.
      script: the fine-tuning script whose checkpoints it exports ("run_squad.py"); None for
        formats of any checkpoint's encoder.
      head: the task head's name in messages ("SQuAD span").
      model_families: sets of task names (run.json's `task` after "<name>/") that share one
        fine-tuned model (MNLI's is exported as MNLI-mm and AX too).
      fields: predict.py's input lines: (fewest, most (None: any), description) tab-separated
        fields; None: predict.py does not serve this format.
      answer: (call, rows, metadata) -> list of JSON-able dicts, one per row of fields. `call(
        signature name, **tensors)` runs a signature of the loaded SavedModel (numpy outputs);
        `metadata` is its export.json.
      describe: (result dict) -> one readable line.
      check_rows: (rows) -> None, raising ValueError for inputs valid line by line that cannot go
        together in one call.
      warm_up_fields: the field counts of the inputs whose signatures the predictor calls once
        at load (default: `fields`' fewest).
      warm_up_text: the text of each field of that call.
      signatures: the signatures predict.py needs (default: those export.json lists).
      needs_sequence_length: whether the export takes --max_seq_length (a Hugging Face
        directory has none).
      convertible: (export_config, files) -> `Convertible` for ONNX (and LiteRT: a classifier's
        or an encoder's); None: this format's models export as SavedModels only.
      served_module: (make_model(**attributes) -> model, tokenizer, export.json settings) -> the
        raw-text `ModelExport` predict.py serves an ONNX or LiteRT export of this format with
        (`served.ServedModule`: ONNX Runtime's or LiteRT's graph as its model), or a Hugging
        Face directory with this format's head (the Keras model it loads into).
      hf_kinds: the model kinds (`modeling.family.MODEL_KINDS`) of the Hugging Face heads
        predict.py serves with this format (a directory's class, `HfHead`, says its kind).
      hf_defaults: the export.json settings a Hugging Face directory without one (not written
        here) is served with: its script's flag defaults (`max_seq_length`, windows).
      hf_settings: (export_config) -> the export.json settings beyond the sequence length, casing
        and labels that export_model.py --format=huggingface records beside the directory of a
        run of this format, so that predict.py serves it as the SavedModel would (windows,
        thresholds).
      litert: whether `convertible` converts to LiteRT too (its raw-text module, or its graph
        on token ids where `Convertible.litert_ids`).
      fine_tuned: (export_config, files) -> (the script's fine-tuned model with every weight from
        --checkpoint, its outputs' names or None): what export_model.py --format=huggingface
        writes with its head, as the transformers class its family declares for it.
      hf_config: (export_config) -> {config.json entry: value} that directory's config.json holds
        beside its family's (a reranker's activation); None: none.
    """
    name: str
    help: str
    export: Callable
    script: Optional[str] = None
    head: Optional[str] = None
    model_families: Tuple[frozenset, ...] = ()
    fields: Optional[Tuple] = None
    answer: Optional[Callable] = None
    describe: Optional[Callable] = None
    check_rows: Callable = lambda rows: None
    warm_up_fields: Optional[Tuple[int, ...]] = None
    warm_up_text: str = "warm up"
    signatures: Optional[Tuple[str, ...]] = None
    needs_sequence_length: bool = True
    convertible: Optional[Callable] = None
    served_module: Optional[Callable] = None
    hf_kinds: Tuple[str, ...] = ()
    hf_defaults: dict = dataclasses.field(default_factory=dict)
    hf_settings: Callable = lambda export_config: {}
    litert: bool = False
    fine_tuned: Optional[Callable] = None
    hf_config: Optional[Callable] = None

    def model_family(self, task_name):
        """The set of task names sharing `task_name`'s fine-tuned model (itself alone)."""
        return next((family for family in self.model_families if task_name in family),
                    frozenset({task_name}))


def register(serving_format):
    """Adds `serving_format`; registering a name twice is a bug (two owners of one format)."""
    if _FORMATS.get(serving_format.name, serving_format) is not serving_format:
        raise ValueError("serving format %r is registered twice" % serving_format.name)
    _FORMATS[serving_format.name] = serving_format
    return serving_format


def names():
    """The registered format names, sorted."""
    return sorted(_FORMATS)


def get(name):
    """The `ServingFormat` called `name`; KeyError naming the registered ones otherwise."""
    try:
        return _FORMATS[name]
    except KeyError:
        raise KeyError("no serving format %r (registered: %s)"
                       % (name, ", ".join(names()) or "none")) from None


def of_script_task(recorded_task):
    """The `ServingFormat` exporting the models of a run.json `task` ("classifier/mrpc", "ner"),
    or None (a pre-training run)."""
    found = _FORMATS.get(recorded_task.partition("/")[0])
    return found if found is not None and found.script else None


def of_hf_kind(kind):
    """The `ServingFormat` serving Hugging Face directories of the model kind `kind`, or None."""
    return next((found for found in _FORMATS.values() if kind in found.hf_kinds), None)


def deferred(module, function):
    """`module.function`, imported when first called: a declaration's export or conversion,
    whose module builds TensorFlow graphs, loads TensorFlow only when it runs."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = f"{module}.{function}"
    return call
