"""Every weight of a new model is drawn on its own, as the original's `tf.truncated_normal_initializer`
per variable: a Keras initializer repeats its values on every call, so sharing one would start
the query, key and value kernels equal and give the embedding tables the same leading rows."""
import keras
import numpy as np

from modeling import BertConfig, BertModel


def test_no_two_weights_start_equal():
    keras.utils.set_random_seed(3)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    model = BertModel(config)
    drawn = [np.asarray(v) for v in model.weights if v.name == "kernel" or v.name.endswith("_embeddings")]
    assert len(drawn) == 3 + 2 * 6 + 1
    rows = [w[:2, :16] for w in drawn]
    for i in range(len(rows)):
        for j in range(i):
            assert not np.allclose(rows[i], rows[j]), (drawn[i].shape, drawn[j].shape)
    std = np.std(np.concatenate([w.ravel() for w in drawn]))
    assert 0.8 * 0.02 < std < 0.95 * 0.02  # the truncated normal's ≈ 0.88 · initializer_range


def test_the_same_seed_gives_the_same_weights():
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    first, second = [], []
    for out in (first, second):
        keras.utils.set_random_seed(5)
        out.extend(np.asarray(v) for v in BertModel(config).weights)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
