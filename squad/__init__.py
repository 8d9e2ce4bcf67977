"""SQuAD v1.1 / v2.0 data side of run_squad.py, identical to google-research/bert's.

Modules:
* `squad.examples`: `read_squad_examples` (JSON -> SquadExample, with JSON-path errors),
  `shuffle_examples` (the original's random.Random(12345) pre-shuffle for training).
* `squad.features`: windows and features (`iter_windows`, `convert_examples_to_features`),
  streamed to TFRecord by `write_features` / `FeatureWriter`; `name_to_features`, `decode_record`.
* `squad.postprocess`: `RawResult`, `write_predictions` (predictions.json, nbest_predictions.json,
  null_odds.json), `get_final_text`.
* `squad.evaluate`: the official v1.1 / v2.0 EM and F1 (`evaluate`, `evaluate_files`; also
  `python -m squad.evaluate data.json predictions.json [--na-prob-file null_odds.json]`).

The package itself imports nothing, so `squad.evaluate` starts without TensorFlow. Prediction is
a few calls around the model:

    from squad import evaluate, examples as sq_examples, features, postprocess
    examples = sq_examples.read_squad_examples(predict_file, False, version_2_with_negative)
    summary = features.write_features(examples, tokenizer, record_file, max_seq_length,
                                      doc_stride, max_query_length, is_training=False)
    # run the model over record_file -> postprocess.RawResult(unique_id, start, end) per feature
    postprocess.write_predictions(examples, summary.windows, results, n_best_size,
                                  max_answer_length, do_lower_case, prediction_file, nbest_file,
                                  null_odds_file, version_2_with_negative,
                                  null_score_diff_threshold)
    evaluate.evaluate_files(predict_file, prediction_file,
                            null_odds_file if version_2_with_negative else None, out_file=...)
"""
