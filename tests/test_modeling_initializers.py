"""Every weight of a new model is drawn on its own, as the original's `tf.truncated_normal_initializer`
per variable: a Keras initializer repeats its values on every call, so sharing one would start
the query, key and value kernels equal and give the embedding tables the same leading rows."""
import keras
import numpy as np

from modeling import BertConfig, BertModel
from modeling.layers.initializers import GlorotUniform, HeUniform, Orthogonal, TruncatedNormal


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


def test_the_values_are_numpys_of_the_seed_whatever_the_dtype():
    """Drawn on the host from the seed alone (so every Keras backend starts the same run) and
    cast to the variable's dtype; the same on every call, as Keras' initializers."""
    init = TruncatedNormal(0.02, seed=7)
    values = np.asarray(init((64, 32)))
    np.testing.assert_array_equal(values, np.asarray(init((64, 32))))
    assert values.dtype == np.float32 and np.abs(values).max() <= 0.04
    rng = np.random.Generator(np.random.PCG64(7))
    first = rng.standard_normal((64, 32), dtype=np.float32)
    inside = np.abs(first) <= 2
    np.testing.assert_array_equal(values[inside], first[inside] * np.float32(0.02))
    # Those outside ±2 are redrawn from the same generator, all at once, in order, until none is.
    while not inside.all():
        first[~inside] = rng.standard_normal(int((~inside).sum()), dtype=np.float32)
        inside = np.abs(first) <= 2
    np.testing.assert_array_equal(values, first * np.float32(0.02))
    as_bf16 = init((64, 32), dtype="bfloat16")
    assert keras.backend.standardize_dtype(as_bf16.dtype) == "bfloat16"
    np.testing.assert_allclose(np.asarray(keras.ops.cast(as_bf16, "float32")), values, rtol=1e-2)


def test_glorot_he_and_orthogonal_draw_their_distributions():
    glorot = np.asarray(GlorotUniform(seed=1)((300, 100)))
    limit = np.sqrt(6 / 400)
    assert np.abs(glorot).max() <= limit and np.abs(glorot).max() > 0.99 * limit
    assert abs(glorot.std() - limit / np.sqrt(3)) < 0.02 * limit
    he = np.asarray(HeUniform(seed=1)((300, 8)))
    assert np.abs(he).max() <= np.sqrt(6 / 300) and he.std() > 0.95 * np.sqrt(2 / 300)
    for shape in ((16, 64), (64, 16)):
        q = np.asarray(Orthogonal(seed=2)(shape))
        small = q @ q.T if shape[0] < shape[1] else q.T @ q
        np.testing.assert_allclose(small, np.eye(min(shape)), atol=1e-5)
    assert not np.array_equal(np.asarray(GlorotUniform()((4, 4))),
                              np.asarray(GlorotUniform()((4, 4))))  # unseeded: a seed each
