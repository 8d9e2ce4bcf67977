"""GLUE / XNLI data side of run_classifier: processors, features, metrics and output files.

Typical flow (what run_classifier.py does):

    processor = processors.get_processor(task_name)
    label_list = processor.get_labels()            # None for STS-B (regression)
    examples = processor.get_train_examples(data_dir)
    bert_runner.tfrecords.write_records(train_file, features.tf_examples(
        examples, label_list, max_seq_length, tokenizer))
    spec = features.name_to_features(max_seq_length, processor.is_regression)
    ...
    bert_runner.results.write_eval_results(path, {**model_results, **metrics.task_metrics(task, y, y_hat)})
    outputs.write_test_results(path, probabilities, len(test_examples))
    outputs.write_glue_submission(output_dir, processor, test_examples,
                                  outputs.predicted_values(probabilities, processor.is_regression))
"""
