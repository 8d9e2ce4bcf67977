"""The encoder on the real tokens' rows only (`skip_padding`, `modeling.layers.token_rows`): the
same values at every real position and for the pooled output, and the same gradients, as on the
whole padded grid; the original checkpoint's golden outputs through the task models that use it."""
import numpy as np
import pytest

from modeling_helpers import encoder_inputs, tiny_expected, tiny_pretrainer

# The shapes of test_modeling_hf_import's multiple-choice batch ([2, 3, 16]) on an encoder of
# the tiny fixture's widths: their forward real-row kernels are compiled once for both.
B, S = 6, 16
# Sequence lengths: full, short, one real token, fully padded (not even [CLS] real).
LENGTHS = np.array([16, 3, 11, 1, 0, 7])


def _batch(vocab_size, seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(S)[None] < LENGTHS[:, None]).astype("int32")
    return {"input_ids": rng.integers(0, vocab_size, (B, S)).astype("int32") * mask,
            "input_mask": mask,
            "token_type_ids": (rng.random((B, S)) < 0.5).astype("int32") * mask}


@pytest.fixture(scope="module")
def model():
    from modeling import BertConfig, BertModel

    return BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3,
                                num_attention_heads=4, intermediate_size=37,
                                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def test_layout_rows_first_rows_real_rows_then_filler():
    from modeling.layers import token_rows

    mask = np.array([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]], "int32")
    rows = token_rows.RealRows(mask, fast=True)
    index = np.asarray(rows.index)
    # [CLS] rows of all three (the padded one too), then the other real positions, then filler.
    assert list(index[:6]) == [0, 4, 8, 1, 2, 9]
    assert len(index) == token_rows.ROW_BUCKET and not index[6:].any()
    # Served requests (small_blocks): multiples of 8 up to ROW_BUCKET, then its multiples.
    small = token_rows.RealRows(mask, fast=True, small_blocks=True)
    np.testing.assert_array_equal(small.index, index[:token_rows.SMALL_BLOCK_ROWS])
    assert [int(token_rows.padded_rows(n, small_blocks=True))
            for n in (1, 8, 9, 24, 25, 33, 249, 255, 256, 257, 600)] == [
                8, 8, 16, 24, 32, 40, 256, 256, 256, 512, 768]
    assert [int(token_rows.padded_rows(n)) for n in (1, 256, 257)] == [256, 256, 512]
    # The count's own integer type throughout (a row count summed in int64, too).
    assert int(token_rows.padded_rows(np.int64(25), small_blocks=True)) == 32
    grid = np.arange(12 * 2, dtype="float32").reshape(3, 4, 2)
    back = np.asarray(rows.to_grid(rows.rows(grid)))
    real = mask.astype(bool)
    real[:, 0] = True
    np.testing.assert_array_equal(back[real], grid[real])


@pytest.mark.parametrize("compiled, small_blocks", [(False, False), (True, False), (True, True)],
                         ids=["eager", "tf.function", "small blocks"])
def test_real_rows_give_the_grid_values_at_real_positions(model, compiled, small_blocks):
    import tensorflow as tf

    from modeling.inference import copy_with

    served = copy_with(model, small_row_blocks=small_blocks)
    call = lambda x, skip, apart=False: served(x, skip_padding=skip,  # noqa: E731
                                               first_row_apart=apart)
    if compiled:
        call = tf.function(call, reduce_retracing=True)
    batch = _batch(50)
    grid = call(batch, False)
    mask = batch["input_mask"].astype(bool)
    has_cls = mask[:, 0]
    # The last layer whole, and its [CLS] rows apart (a classifier's) on either layout.
    for real in (call(batch, True), call(batch, True, True), call(batch, False, True)):
        for name in ("sequence_output", "embedding_output"):
            np.testing.assert_allclose(np.asarray(real[name])[mask],
                                       np.asarray(grid[name])[mask], rtol=0, atol=1e-6)
        for a, b in zip(grid["all_encoder_layers"], real["all_encoder_layers"]):
            np.testing.assert_allclose(np.asarray(b)[mask], np.asarray(a)[mask], rtol=0,
                                       atol=1e-6)
        np.testing.assert_allclose(np.asarray(real["pooled_output"])[has_cls],
                                   np.asarray(grid["pooled_output"])[has_cls], rtol=0, atol=1e-6)


def test_real_rows_give_the_grid_gradients(model):
    """With the last layer whole, and with its [CLS] rows apart."""
    import tensorflow as tf

    batch = _batch(50, seed=1)
    weights = tf.constant(batch["input_mask"], tf.float32)[..., None]

    def gradients(skip, apart=False):
        with tf.GradientTape() as tape:
            out = model(batch, training=True, skip_padding=skip, first_row_apart=apart)
            loss = (tf.reduce_sum(tf.square(out["pooled_output"][:4]))
                    + tf.reduce_sum(tf.sin(out["sequence_output"]) * weights))
        return [tf.convert_to_tensor(g).numpy()
                for g in tape.gradient(loss, model.trainable_variables)]

    grid = gradients(False)
    # Rounding only (the rows are summed in another order); the key bias's gradient is 0 in
    # exact arithmetic (a softmax does not see a constant added to every score).
    atol = 1e-6 * max(np.abs(g).max() for g in grid)
    for real in (gradients(True), gradients(True, apart=True), gradients(False, apart=True)):
        for variable, a, b in zip(model.trainable_variables, grid, real):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=atol, err_msg=variable.path)


def test_the_last_layers_rows_apart_train_as_the_whole_layer_with_dropout_and_recompute():
    """Dropout masks are drawn for each row's grid position, so the [CLS] rows computed apart
    get the whole layer's masks: the same outputs and gradients, activations recomputed too."""
    import tensorflow as tf

    from modeling import BertConfig, BertModel
    from modeling.inference import copy_with

    # The module's widths, dropout at the original's 0.1.
    base = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3,
                                num_attention_heads=4, intermediate_size=37))
    batch = _batch(50, seed=2)
    mask = batch["input_mask"].astype(bool)

    def step(apart):
        encoder = copy_with(base, recompute=True)  # each copy draws the masks the base would
        with tf.GradientTape() as tape:
            out = encoder(batch, training=True, skip_padding=True, first_row_apart=apart)
            loss = (tf.reduce_sum(tf.square(out["pooled_output"]))
                    + tf.reduce_sum(tf.sin(out["sequence_output"]) * mask[..., None]))
        grads = tape.gradient(loss, encoder.trainable_variables)
        return (np.asarray(out["sequence_output"])[mask], np.asarray(out["pooled_output"]),
                [tf.convert_to_tensor(g).numpy() for g in grads])

    (whole_rows, whole_pooled, whole_grads), (rows, pooled, grads) = step(False), step(True)
    np.testing.assert_allclose(rows, whole_rows, rtol=0, atol=1e-6)
    np.testing.assert_allclose(pooled, whole_pooled, rtol=0, atol=1e-6)
    atol = 1e-6 * max(np.abs(g).max() for g in whole_grads)
    for variable, a, b in zip(base.trainable_variables, whole_grads, grads):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=atol, err_msg=variable.path)


def test_real_rows_match_the_original_at_real_positions():
    # The encoder's outputs on real rows against the original's, at the golden tests' tolerance.
    expected = tiny_expected()
    encoder = tiny_pretrainer().encoder(encoder_inputs(expected), skip_padding=True)
    mask = expected["input_mask"].astype(bool)
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=0, atol=1e-5)  # noqa
    close(np.asarray(encoder["sequence_output"])[mask], expected["sequence_output"][mask])
    for layer, original in zip(encoder["all_encoder_layers"], expected["all_encoder_layers"]):
        close(np.asarray(layer)[mask], original[mask])
    close(encoder["pooled_output"], expected["pooled_output"])
