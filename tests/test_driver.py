"""bert_runner.driver pieces not covered by the scripts' end-to-end tests."""
import tensorflow as tf

from modeling_helpers import tiny_config
from bert_tasks.pretraining.task import PretrainingTask
from bert_runner import driver
from bert_runner.run_config import RunConfig


def test_recompute_activations_flag_reaches_every_encoder_layer(tmp_path):
    strategy = tf.distribute.get_strategy()
    for recompute in (False, True):
        run = RunConfig(str(tmp_path), recompute_activations=recompute)
        trainer = driver.build_trainer(PretrainingTask(16, 4), run, tiny_config(), strategy, 1, 0)
        assert trainer.model.bert.recompute is recompute
        assert all(layer.recompute is recompute for layer in trainer.model.bert.encoder_layers)
