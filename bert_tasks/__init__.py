"""The tasks: each package holds one task's data side (reading, features, TFRecords) and its
`bert_runner.task.Task`.

    classifier/   GLUE and XNLI sentence (pair) classification   run_classifier.py
    squad/        SQuAD v1.1 / v2.0 question answering           run_squad.py
    swag/         SWAG multiple choice                           run_swag.py
    ner/          CoNLL-2003 named-entity recognition            run_ner.py, run_ner_feature_based.py
    pretraining/  masked LM + next sentence: the Task, its data  run_pretraining.py,
                  (`data/`) and the vocabulary builder           create_pretraining_data.py,
                  (`vocab_building/`)                            build_vocab.py

Each task that serves its models declares how in its `serving` module (`serving.register_all`
finds them); `windows` holds the sliding windows two tasks and their exports share. The demo's
data sets are in `demo_data/`, the paper's experiments (Table 5, Figure 2) in `experiments/`.
"""
