"""`with_bfloat16_weights`: the same outputs as the model under mixed_bfloat16, bit for bit."""
import keras
import numpy as np

from modeling import BertModel
from modeling.inference import with_bfloat16_weights
from modeling_helpers import encoder_inputs, tiny_config, tiny_expected


def test_bfloat16_weights_give_the_mixed_precision_outputs():
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = BertModel(tiny_config())
    finally:
        keras.config.set_dtype_policy("float32")
    copy = with_bfloat16_weights(mixed)
    assert copy.embedding_table.dtype == "bfloat16"
    assert copy.encoder_layers[0].output_gamma.dtype == "float32"
    inputs = encoder_inputs(tiny_expected())
    want, got = mixed(inputs), copy(inputs)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(np.asarray(keras.ops.cast(got[name], "float32")),
                                      np.asarray(keras.ops.cast(want[name], "float32")))
