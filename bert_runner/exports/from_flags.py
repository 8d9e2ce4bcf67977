"""export_model.py's SavedModel formats: each loads the model of `--checkpoint` for its --format
(refusing another script's checkpoint; with the BiLSTM when its run.json records
`--bilstm_on_top`) and writes the raw-text SavedModel.

    EXPORTS[FLAGS.format](FLAGS, files)   # files: bert_runner.startup.model_files(...)
"""
from bert_runner import export, run_files


def _bf16(flag_values, model):
    """`model` with bfloat16 weights under --mixed_precision=bf16, else itself."""
    if flag_values.mixed_precision != "bf16":
        return model
    from modeling.inference import with_bfloat16_weights

    return with_bfloat16_weights(model)


def classifier(flag_values, files):
    """A run_classifier model (single-label, regression or multi-label; truncated or windowed)."""
    from bert_tasks.classifier import processors

    task_name = flag_values.task_name
    if not task_name:
        raise ValueError("--task_name is required with --format=classifier")
    multi_label = task_name.lower() == "multilabel"
    labels = flag_values.labels
    if multi_label and labels:
        run_files.check_recorded_labels(labels, flag_values.checkpoint, "--labels",
                                        ",".join(labels))
    elif multi_label:
        labels = _recorded_labels(flag_values.checkpoint, "--labels")
    processor = processors.get_processor(task_name, labels if multi_label else None)
    model = export.load_classifier(files.config, processor.num_labels, flag_values.checkpoint,
                                   task_name=task_name, config_file=files.config_file)
    doc_stride = None
    if flag_values.long_documents:
        doc_stride = 64 if flag_values.doc_stride is None else flag_values.doc_stride
    export.export_classifier(
        _bf16(flag_values, model), files.vocab_file, flag_values.do_lower_case,
        flag_values.max_seq_length, processor.get_labels(), flag_values.export_dir,
        multi_label_threshold=flag_values.multi_label_threshold if multi_label else None,
        doc_stride=doc_stride, window_aggregation=flag_values.window_aggregation)


def embedding(flag_values, files):
    """The encoder of any checkpoint, pooled into one vector per text."""
    if not flag_values.pooling:
        raise ValueError("--format=embedding needs --pooling=cls, mean or max")
    model = export.load_encoder(files.config, flag_values.checkpoint,
                                config_file=files.config_file)
    export.export_embedding(_bf16(flag_values, model), files.vocab_file,
                            flag_values.do_lower_case, flag_values.max_seq_length,
                            flag_values.pooling, flag_values.normalize, flag_values.export_dir)


def squad(flag_values, files):
    """A run_squad model, with its windows and post-processing settings."""
    from bert_runner.exports.squad import export_squad
    from bert_tasks.squad.task import PostprocessOptions
    from modeling import BertSpanLabeler

    model = export.load_fine_tuned(BertSpanLabeler(files.config, **_recorded_model(flag_values)),
                                   flag_values.checkpoint, "squad", files.config_file)
    options = PostprocessOptions(
        n_best_size=flag_values.n_best_size, max_answer_length=flag_values.max_answer_length,
        do_lower_case=flag_values.do_lower_case,
        version_2_with_negative=flag_values.version_2_with_negative,
        null_score_diff_threshold=flag_values.null_score_diff_threshold)
    export_squad(_bf16(flag_values, model), files.vocab_file, flag_values.do_lower_case,
                 flag_values.max_seq_length,
                 128 if flag_values.doc_stride is None else flag_values.doc_stride,
                 flag_values.max_query_length, options, flag_values.export_dir)


def ner(flag_values, files):
    """A run_ner model, with its label list (--entity_types or its label_list.txt)."""
    from bert_runner.exports.ner import export_ner
    from bert_tasks.ner import tags
    from modeling import BertTokenClassifier

    if flag_values.entity_types:
        label_list = tags.label_list(flag_values.entity_types)
        source = "--entity_types=%s" % ",".join(flag_values.entity_types)
        run_files.check_recorded_labels(label_list, flag_values.checkpoint, "--entity_types",
                                        ",".join(flag_values.entity_types))
    else:
        label_list = _recorded_labels(flag_values.checkpoint, "--entity_types")
        source = "its label_list.txt"
    model = export.load_fine_tuned(
        BertTokenClassifier(files.config, len(label_list), **_recorded_model(flag_values)),
        flag_values.checkpoint, "ner", files.config_file, label_source=source)
    export_ner(_bf16(flag_values, model), files.vocab_file, flag_values.do_lower_case,
               flag_values.max_seq_length, label_list, flag_values.export_dir)


def swag(flag_values, files):
    """A run_swag model."""
    from bert_runner.exports.swag import export_swag
    from modeling import BertMultipleChoice

    model = export.load_fine_tuned(BertMultipleChoice(files.config, **_recorded_model(flag_values)),
                                   flag_values.checkpoint, "swag", files.config_file)
    export_swag(_bf16(flag_values, model), files.vocab_file, flag_values.do_lower_case,
                flag_values.max_seq_length, flag_values.export_dir)


EXPORTS = {"classifier": classifier, "embedding": embedding, "squad": squad, "ner": ner,
           "swag": swag}


def _recorded_model(flag_values):
    """The task model's options the run that wrote --checkpoint recorded (its run.json): the
    model is built as it was fine-tuned (`export.load_classifier` does the same)."""
    return {"bilstm_on_top": export.recorded_bilstm_on_top(flag_values.checkpoint)}


def _recorded_labels(checkpoint, flag):
    """The label_list.txt the run wrote beside `checkpoint`; refused naming `flag` without one."""
    labels = run_files.recorded_labels(checkpoint)
    if not labels:
        raise ValueError(f"--checkpoint={checkpoint} has no label_list.txt beside it: give the "
                         f"model's labels in order with {flag}")
    return labels
