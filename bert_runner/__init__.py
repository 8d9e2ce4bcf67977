"""Run machinery shared by the scripts: start-up validation, distribution strategy from flags,
TFRecord input pipelines, the train/eval loop, checkpoints and export."""
