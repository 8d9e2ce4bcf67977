"""What a run keeps beside its checkpoints, and how a run's starting point is found and opened.

    record       run.json: what the run is (read and written here only), the folders that
                 describe a checkpoint's run (its own, a --seeds `seed_<n>` folder's output_dir),
                 read once as a `RunRecord`
    labels       label_list.txt: a classifier's or tagger's labels in output order
    hashes       content hashes of what a run reads (a checkpoint, a vocabulary, a data file)
    supplied     the config and vocabulary a run's output_dir supplies for its own checkpoints
    model_files  the config and vocabulary a run starts from, from its flags: the one walk of
                 a starting point, its checkpoint opened once (`bert_runner.plan`)
    checkpoints  a starting point opened with its run's record and labels, errors naming the flag

`modeling.checkpoint` reads and loads the layouts and knows no run: these modules add the run
(its record's model family, its labels, the flag a path came from) around it. `record` and
`supplied` import no TensorFlow: the scripts' flag checks use them before it is imported.
"""
