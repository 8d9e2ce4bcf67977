"""The paper's experiments as commands, built on the tasks:

  figure2   run_checkpoint_sweep.py: every checkpoint of pre-training runs fine-tuned on a task,
            the metric against the pre-training steps (the paper's Figure 2)
  table5    `python demo.py --table5`: three pre-training objectives, each fine-tuned on the
            demo's tasks, beside the paper's Table 5
  electra   `python demo.py --electra`: BERT and ELECTRA of the same size pre-trained for the
            same CPU time, each fine-tuned with several seeds on the demo's tasks, beside the
            ELECTRA paper's figures
  demo_pipeline
            what `python demo.py` and its `--table5` and `--electra` run their stages with (each
            a script in a subprocess, in the work folder), and the data stages all three run
"""
