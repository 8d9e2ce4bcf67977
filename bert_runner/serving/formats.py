"""The machinery's own serving formats, declared (`registry.ServingFormat`): the embedding (any
checkpoint's encoder, pooled), the Hugging Face layout, LiteRT and ONNX; each export is imported
when it runs (`registry.deferred`).
"""
from bert_runner.serving import registry

# LiteRT's precisions (`litert.convert`).
QUANTIZATIONS = ("float32", "float16", "dynamic_int8", "int8")


def _embedding_answers(call, rows, metadata):
    out = call("serving_default", text_a=[p[0] for p in rows])
    return [{"embedding": vector.tolist()} for vector in out["embedding"]]


def _describe_embedding(result):
    vector = result["embedding"]
    return "[%s ... ] (%d values)" % (" ".join("%.4f" % v for v in vector[:4]), len(vector))


def _huggingface(export_config, files):
    """A fine-tuned run's model (its run.json names the script) as the transformers class of its
    head (`ServingFormat.fine_tuned`, `modeling.checkpoint.write_hugging_face(head=True)`:
    BertForSequenceClassification with its labels, ...; refused naming what can be exported
    where transformers has none); else the encoder of any checkpoint, or a pre-training
    checkpoint's whole model; each as config.json, model.safetensors and vocab.txt. With
    --pooling the encoder and sentence-transformers' module files; with --encoder_only the
    encoder alone."""
    import os

    from absl import logging

    from bert_runner.serving import provenance
    from bert_runner.serving.conversion import METADATA_FILE
    from modeling.checkpoint import write_hugging_face
    from modeling.family import NoHfClass
    from modeling.json_file import read_json_object
    from bert_runner.startup import check_pooling

    task = provenance.recorded_script_task(export_config.checkpoint)
    fine_tuned = registry.of_script_task(task) if task else None
    head, labels, hf_config = False, None, {}
    if export_config.pooling or export_config.encoder_only:  # sentence-transformers: an encoder
        model, what = provenance.load_encoder(files.config, export_config.checkpoint,
                                              config_file=files.config_file), "encoder"
    elif fine_tuned is not None and fine_tuned.fine_tuned is not None:
        (model, labels), head = fine_tuned.fine_tuned(export_config, files), True
        if fine_tuned.hf_config is not None:
            hf_config = fine_tuned.hf_config(export_config)
        what = f"{fine_tuned.script} model with its head"
    else:
        model, what = _pretrainer_or_encoder(files.config, export_config.checkpoint,
                                             files.config_file, provenance)
    sentence_embedding = None
    if export_config.pooling:
        check_pooling(export_config.pooling, files.config)
        sentence_embedding = (export_config.pooling, export_config.normalize,
                              export_config.max_seq_length)
    json_files = {}
    if head:  # how predict.py serves the directory: as the run's SavedModel would
        json_files[METADATA_FILE] = {
            "format": fine_tuned.name, "max_seq_length": export_config.max_seq_length,
            "do_lower_case": export_config.do_lower_case, "labels": labels,
            **fine_tuned.hf_settings(export_config)}
    try:
        directory = write_hugging_face(model, export_config.export_dir, files.vocab_file,
                                       export_config.do_lower_case, sentence_embedding, head=head,
                                       labels=labels, json_files=json_files,
                                       hf_config=hf_config)
    except NoHfClass as error:
        raise ValueError(
            f"--checkpoint={export_config.checkpoint} ({task}): {error}. Export it with "
            f"--format={fine_tuned.name} (a SavedModel), or its encoder alone with "
            "--format=huggingface --encoder_only") from None
    # The class transformers loads it as says what the directory holds (its heads or none).
    architectures = ", ".join(
        read_json_object(os.path.join(directory, "config.json"))["architectures"])
    logging.info("Wrote the %s in Hugging Face's layout (%s)%s to %s", what, architectures,
                 " with sentence-transformers' pooling" if sentence_embedding else "", directory)


def _pretrainer_or_encoder(config, checkpoint, config_file, provenance):
    """What the Hugging Face layout holds of `checkpoint`: its family's whole pre-training model
    when the checkpoint holds all of it (BERT's: the encoder and both heads; ELECTRA's: the
    discriminator and its head, and the generator, written as its own folder), else its encoder;
    with which it is."""
    from bert_runner.runs.checkpoints import load_checkpoint
    from modeling import families

    model = families.build_model("pretrainer", config)
    try:
        load_checkpoint(model, checkpoint, strict=True, flag="--checkpoint",
                        config_file=config_file)
        return model, "pre-training model"
    except ValueError:  # a fine-tuned model, or an encoder alone: its encoder is exported
        return provenance.load_encoder(config, checkpoint, config_file=config_file), "encoder"


EMBEDDING = registry.register(registry.ServingFormat(
    name="embedding",
    help="raw text -> one vector per text, by --pooling and --normalize (SavedModel)",
    export=registry.deferred("bert_runner.serving.embedding", "export_from_config"),
    fields=(1, 1, "text"), answer=_embedding_answers, describe=_describe_embedding,
    convertible=registry.deferred("bert_runner.serving.embedding", "convertible_from_config"),
    served_module=registry.deferred("bert_runner.serving.embedding", "served_module")))
HUGGINGFACE = registry.register(registry.ServingFormat(
    name="huggingface",
    help="a fine-tuned run's model as config.json, model.safetensors and vocab.txt for "
         "transformers' class of its head (BertForSequenceClassification with its labels, "
         "BertForTokenClassification, BertForQuestionAnswering, BertForMultipleChoice; the "
         "ELECTRA classes that compute its heads), else the encoder (BertModel, ElectraModel; a "
         "BERT pre-training checkpoint as BertForPreTraining, an ELECTRA one as "
         "ElectraForPreTraining with its generator in generator/) (with --pooling the encoder "
         "and a sentence-transformers model; --encoder_only: the encoder alone)",
    # The layout has no sequence length: any the config's positions allow.
    export=_huggingface, needs_sequence_length=False))
FILL_MASK = registry.register(registry.ServingFormat(
    name="fill_mask",
    help="raw text with [MASK] -> each mask's most likely word-pieces (predict.py --top_k), as "
         "transformers' fill-mask pipeline gives them, from any checkpoint with a masked-LM head "
         "(SavedModel)",
    export=registry.deferred("bert_runner.serving.fill_mask", "export_from_config"),
    fields=(1, 1, "a text with [MASK]"),
    answer=registry.deferred("bert_runner.serving.fill_mask", "answers"),
    describe=registry.deferred("bert_runner.serving.fill_mask", "describe"),
    check_rows=registry.deferred("bert_runner.serving.fill_mask", "check_rows"),
    signatures=("serving_default", "vocabulary"), warm_up_text="warm [MASK]",
    served_module=registry.deferred("bert_runner.serving.fill_mask", "served_module"),
    hf_kinds=("pretrainer",), hf_defaults={"max_seq_length": 128}))
TFHUB = registry.register(registry.ServingFormat(
    name="tfhub",
    help="any checkpoint's encoder as TF Hub's text API, export_dir/encoder (its mlm "
         "sub-object where the checkpoint has BERT's masked-LM head) and "
         "export_dir/preprocessing (strings -> inputs at --max_seq_length), as TF Model "
         "Garden's export_tfhub.py writes them: for hub.KerasLayer and keras.layers.TFSMLayer",
    export=registry.deferred("bert_runner.serving.tf_hub", "export_from_config")))
LITERT = registry.register(registry.ServingFormat(
    name="litert",
    help="raw text -> a classifier's probabilities (--task_name) or a vector (--pooling) in one "
         ".tflite, tokenizer inside (--quantization)",
    export=registry.deferred("bert_runner.serving.litert", "export_from_config")))
ONNX = registry.register(registry.ServingFormat(
    name="onnx",
    help="token ids -> the run's task's outputs (a classifier's probabilities, SQuAD's or NER's "
         "logits, SWAG's scores) or a vector, as model.onnx beside vocab.txt "
         "(requirements-onnx.txt)",
    export=registry.deferred("bert_runner.serving.onnx", "export_from_config")))
