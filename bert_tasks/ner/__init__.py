"""CoNLL-2003 named-entity recognition for run_ner.py and the feature-based tagger.

Modules:
* `bert_tasks.ner.conll`: the CoNLL reader (`read_conll_file` -> Documents of Sentences; IOB1/IOB2 tags,
  `-DOCSTART-` documents, errors naming file:line).
* `bert_tasks.ner.tags`: IOB schemes (`to_iob2`, `to_iob1`, `in_scheme`), the label list (O, B-T, I-T
  per type); run_ner.py's model learns IOB1.
* `bert_tasks.ner.features`: windows with maximal document context, first-sub-token label positions,
  TFRecords (`make_windows`, `tf_examples`, `name_to_features`).
* `bert_tasks.ner.predictions`: predicted tags back onto words, the predictions file in CoNLL format.
* `bert_tasks.ner.conlleval`: CoNLL's conlleval scorer (also `python -m bert_tasks.ner.conlleval predictions.txt`).
* `bert_tasks.ner.sets`: one file read, its windows and TFRecords together (`NerSet`).
* `bert_tasks.ner.gazetteer`: CoNLL-style words and tags from lists of names (the demo's labels).
* `bert_tasks.ner.task`: `NerTask`, run_ner.py's `bert_runner.task.Task` (fine-tuning, paper section 5.3).
* The feature-based approach (paper Table 7, run_ner_feature_based.py): `bert_tasks.ner.activations`
  (frozen BERT's activations of every word, computed once and cached), `bert_tasks.ner.lstm_tagger` (the
  two-layer BiLSTM tagger), `bert_tasks.ner.feature_based` (the six layer choices, training, the table).

The data side, as run_ner.py uses it:

    documents = conll.read_conll_file(os.path.join(data_dir, "train.txt"))
    sentences = conll.sentences_of(documents)
    label_list = tags.label_list(tags.entity_types_of(s.tags for s in sentences))
    windows = list(features.make_windows(documents, tokenizer, max_seq_length))
    bert_runner.tfrecords.write_records("train.tf_record", features.tf_examples(
        windows, sentences, label_list, tokenizer, max_seq_length))
    ...  # predicted label ids per window, [num_windows, max_seq_length]
    predicted = predictions.sentence_tags(windows, predicted_ids, sentences, label_list)
    counts = predictions.write_predictions("predictions.txt", documents, predicted)
    conlleval.metrics(counts)["overall"]["f1"]

The package imports no TensorFlow itself; `bert_tasks.ner.conlleval` and `bert_tasks.ner.tags` never do.
"""
