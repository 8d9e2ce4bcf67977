"""The backends' training-step engines. `jax_step`: one step compiled with `jax.jit` over Keras'
stateless API (Keras' JAX backend); it imports no TensorFlow, so it runs on machines without it."""
