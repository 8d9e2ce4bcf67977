"""The original's only initializer, `tf.truncated_normal_initializer(stddev=initializer_range)`."""
import keras


def truncated_normal(stddev):
    """Normal(0, stddev) redrawn outside ±2·stddev and not rescaled (empirical std ≈ 0.88·stddev).

    Keras' TruncatedNormal has exactly these semantics, like TF1's.
    """
    return keras.initializers.TruncatedNormal(mean=0.0, stddev=stddev)
