"""The one writer: a model in the original layout, in Hugging Face's, or a LoRA run's adapters.

Every writer writes a LoRA model as a copy with its adapters merged into its kernels
(`modeling.inference.merged_copy`; the model itself without LoRA), so what it writes is a plain
model that any reader, ours or another project's, loads. A run's own checkpoints (`ckpt-N`, `reader.ModelVariables`) are written by
its `tf.train.CheckpointManager` (`bert_runner.trainer`), with their run files (`bert_runner.runs`).
"""
from modeling.inference import merged_copy
from modeling.checkpoint import adapters, hugging_face, original


def write_original(model, prefix, extra_tensors=None):
    """`model` as an original-layout TF1 checkpoint at `prefix` (`original.save_tf1_checkpoint`:
    atomic, the index last). Returns `prefix`."""
    return original.save_tf1_checkpoint(merged_copy(model), prefix, extra_tensors)


def write_hugging_face(model, directory, vocab_file, do_lower_case, sentence_embedding=None,
                       head=False, labels=None, json_files=None, hf_config=None):
    """`model` as a Hugging Face directory (`hugging_face.save_hf_model`): its encoder as the
    family's bare model (`BertModel`, `ElectraModel`), or what its family writes for it (the
    pre-training models: BERT's as `BertForPreTraining`, ELECTRA's as `ElectraForPreTraining`
    with the generator as `ElectraForMaskedLM` in `generator/`); with `head`, a fine-tuned
    model as the transformers class of its head (`BertForSequenceClassification`, ..., its
    outputs named by `labels`; `modeling.family.NoHfClass` where there is none); with
    `sentence_embedding`, sentence-transformers' files too; `json_files` ({relative path: JSON
    value}) written beside; `hf_config`: entries of the head's config.json beside the family's
    (a cross-encoder's activation). Returns `directory`."""
    return hugging_face.save_hf_model(merged_copy(model), directory, vocab_file,
                                      do_lower_case, sentence_embedding, head, labels, json_files,
                                      hf_config)


def write_adapters(model, output_dir, settings):
    """A LoRA run's adapters file in `output_dir` (`adapters.save`). Returns its path."""
    return adapters.save(model, output_dir, settings)
