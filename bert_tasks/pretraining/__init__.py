"""Pre-training as a task: masked LM + next sentence prediction (run_pretraining.py)."""
