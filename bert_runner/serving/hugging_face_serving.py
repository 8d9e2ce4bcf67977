"""predict.py on a Hugging Face directory holding a task head (`BertForTokenClassification`, ...):
its weights loaded into the task's Keras model, answered by the task's own raw-text module in this
process (`served.ServedModule`), so that its answers are the SavedModel's of the same model.

Which task serves it is its head's: config.json's `architectures` (and `problem_type`) name the
head (`ModelFamily.head_of_hf_config`), whose model kind a task declares
(`ServingFormat.hf_kinds`). A sequence classifier of one logit without `problem_type`
"regression" is a sentence-transformers cross-encoder (a reranker's export, or one of the
Hub's): served as a 2-label classifier whose probability of "1" is its sigmoid score. A
masked-LM class (`BertForMaskedLM`, `...ForPreTraining`) is served as a fill-mask export. Its
settings are the `export.json` export_model.py --format=huggingface writes beside a run's model (sequence length, windows, thresholds); a directory made elsewhere is
served with its labels (`id2label`), its casing (tokenizer_config.json) and its task script's flag
defaults (`ServingFormat.hf_defaults`).
"""
import os

from bert_runner.serving import registry
from bert_runner.serving.conversion import METADATA_FILE
from bert_runner.serving.served import ServedModule

_FLAG = "--model"
CROSS_ENCODER_LABELS = ("0", "1")
# The transformers classes with a masked-LM head, served as fill-mask (BertForMaskedLM, ...).
MASKED_LM_CLASSES = ("ForMaskedLM", "ForPreTraining")


def serving(directory):
    """(export.json settings with the task's `format`, `call(signature name, **arrays)`) of the
    Hugging Face directory `directory` (see the module docstring).

    Raises:
      ValueError naming the directory: its class holds no head a task serves (a bare encoder,
      a pre-training model, a head configured otherwise than ours), or its weights are not all
      that head's model (any but the pooler, which the token and span classes lack).
    """
    from bert_runner.runs.checkpoints import open_checkpoint
    from modeling import families
    from modeling.checkpoint import is_pooler
    from modeling.json_file import read_json_object

    hf = read_json_object(os.path.join(directory, "config.json")) or {}
    found = open_checkpoint(directory, _FLAG)
    if any(name.endswith(MASKED_LM_CLASSES) for name in hf.get("architectures") or ()):
        return _masked_lm_serving(directory, found)
    head = found.family.head_of_hf_config(hf)
    kind = kind_of(found.family, head) if head is not None else None
    serving_format = registry.of_hf_kind(kind) if kind else None
    if serving_format is None:
        served = sorted({value.architecture for name, value in found.family.hf_heads.items()
                         if hasattr(value, "architecture") and registry.of_hf_kind(name)})
        raise ValueError(
            f"{_FLAG}={directory} is a Hugging Face directory of "
            f"{', '.join(hf.get('architectures') or ['no class'])}, not of a task head "
            f"predict.py serves ({', '.join(served)}): give the directory export_model.py "
            "--format=huggingface writes of a fine-tuning run")
    labels, cross_encoder = None, False
    if head.labels and hf.get("problem_type") != "regression":
        id2label = hf.get("id2label") or {}
        labels = [str(id2label.get(str(i), f"LABEL_{i}")) for i in range(len(id2label) or 2)]
        # One logit and no regression: a cross-encoder (sentence-transformers' sigmoid score),
        # served as the probabilities of "0" and "1" for predict.py --rerank.
        cross_encoder = len(labels) == 1
        if cross_encoder:
            labels = list(CROSS_ENCODER_LABELS)
    settings = {**serving_format.hf_defaults, "labels": labels, "cross_encoder": cross_encoder,
                "do_lower_case": True if found.do_lower_case is None else found.do_lower_case,
                **(read_json_object(os.path.join(directory, METADATA_FILE)) or {}),
                "format": serving_format.name}
    if kind == "multi_label":
        settings.setdefault("multi_label_threshold", 0.5)
    outputs = len(settings["labels"]) if settings["labels"] else 1
    model = families.build_model(kind, found.config, *((outputs,) if head.labels else ()))
    # Every weight but the pooler, which transformers' token and span classes do not hold (a
    # cross-encoder's one logit z is read as the two labels' [0, z]).
    report = found.load_into(model, strict=False, config_file=found.config_file)
    missing = [name for name in report.missing if head.pooler or not is_pooler(name)]
    if missing:
        raise ValueError(f"{_FLAG}={directory} ({head.architecture}) lacks "
                         f"{', '.join(missing[:5])}: it does not hold the model its "
                         "config.json describes")
    vocab_file = found.vocab_file or os.path.join(directory, "vocab.txt")
    served = ServedModule(lambda **unused: model, vocab_file, settings, serving_format)
    # As the module serves them (a SQuAD model's own null-score threshold where none is set).
    settings.update({k: v for k, v in served.module.metadata().items() if k != "signatures"})
    return settings, served.call


def _masked_lm_serving(directory, found):
    """`serving` of a masked-LM directory (`MASKED_LM_CLASSES`): the fill-mask format."""
    from bert_runner.serving import fill_mask

    serving_format = registry.of_hf_kind("pretrainer")
    model = fill_mask.load_masked_lm(found.config, directory, found.config_file, _FLAG)
    settings = {**serving_format.hf_defaults,
                "do_lower_case": True if found.do_lower_case is None else found.do_lower_case,
                "format": serving_format.name}
    vocab_file = found.vocab_file or os.path.join(directory, "vocab.txt")
    served = ServedModule(lambda **unused: model, vocab_file, settings, serving_format)
    return settings, served.call


def kind_of(family, head):
    """The model kind whose head `head` is in `family`'s `hf_heads`."""
    return next(name for name, value in family.hf_heads.items() if value is head)

