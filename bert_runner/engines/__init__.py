"""The backends' training-step engines. `jax_step`: one step compiled with `jax.jit` over Keras'
stateless API (Keras' JAX backend); it imports no TensorFlow, so it runs on machines without it.
`jax_trainer`: the trainer's loop with that step (TensorFlow for the input and checkpoints)."""
import keras


def compiled(fn, **tf_function_options):
    """`fn` (a forward pass of a model, no variable assigned) compiled by Keras' backend: a
    `tf.function` with `tf_function_options` under TensorFlow, `jax.jit` under JAX (the
    variables' values then enter as constants, compiled per input shape)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, **tf_function_options)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    return fn
