"""SQuAD v1.1 / v2.0 for run_squad.py: the data side identical to google-research/bert's, the model
side and the official scores.

Modules:
* `bert_tasks.squad.examples`: `read_squad_examples` / `examples_from_data` (JSON -> SquadExample, with
  JSON-path errors), `shuffle_examples` (the original's random.Random(12345) pre-shuffle).
* `bert_tasks.squad.features`: windows and features (`iter_windows`, `convert_examples_to_features`),
  streamed as TFRecord examples by `tf_examples`; `name_to_features`.
* `bert_tasks.squad.task`: `SquadTask`, run_squad.py's `bert_runner.task.Task` (reading both files,
  records, `build_model`, `span_loss_fn`, `predict_step`, `raw_results`, the scores).
* `bert_tasks.squad.postprocess`: `RawResult`, `write_predictions` (predictions.json, nbest_predictions.json,
  null_odds.json), `get_final_text`.
* `bert_tasks.squad.evaluate`: the official v1.1 / v2.0 EM and F1 (`evaluate`, `score_predictions`,
  `evaluate_files`; also `python -m bert_tasks.squad.evaluate data.json predictions.json
  [--na-prob-file null_odds.json]`).

The package itself imports nothing, and `bert_tasks.squad.examples` / `bert_tasks.squad.evaluate` load no TensorFlow,
so the evaluator starts in a second. Prediction, as `SquadTask` does it for the driver:

    gold = io_utils.read_json(predict_file)
    examples = sq_examples.examples_from_data(gold, False, version_2_with_negative, predict_file)
    windows = tuple(features.iter_windows(examples, tokenizer, max_seq_length, doc_stride,
                                          max_query_length, False))
    num_features, _ = bert_runner.tfrecords.write_records(record_file, features.window_records(
        windows, examples, tokenizer, max_seq_length, False))
    batches = trainer.predict(dataset_fn(record_file), task.predict_step)  # bert_runner.trainer
    out = postprocess.write_predictions(examples, windows,
                                        task.raw_results(batches, num_features),
                                        n_best_size, max_answer_length, do_lower_case,
                                        prediction_file, nbest_file, null_odds_file,
                                        version_2_with_negative, null_score_diff_threshold)
    metrics = evaluate.score_predictions(gold, out, version_2_with_negative, predict_file)
"""
