"""tests/xla_cache_keys.py: a compiled function's name is its content's, whichever function
object (or process) traced it; other functions keep TensorFlow's names; both still run."""
import numpy as np
import tensorflow as tf

import xla_cache_keys


def _name(function, *args):
    return function.get_concrete_function(*args).function_def.signature.name


def test_compiled_functions_are_named_by_their_content():
    xla_cache_keys.install()
    spec = tf.TensorSpec([4, 3], tf.float32)
    twice = [tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True) for _ in range(2)]
    other = tf.function(lambda x: x * 3.0 + 1.0, jit_compile=True)
    plain = tf.function(lambda x: x * 2.0 + 1.0)
    # The same graph: one name, whichever function object traced it (in another process too).
    assert _name(twice[0], spec) == _name(twice[1], spec)
    assert _name(twice[0], spec).startswith("__inference_<lambda>_")
    assert _name(other, spec) != _name(twice[0], spec)
    assert _name(twice[0], tf.TensorSpec([5, 3], tf.float32)) != _name(twice[0], spec)
    # Functions that are not compiled keep TensorFlow's per-process names.
    assert _name(plain, spec) != _name(tf.function(lambda x: x * 2.0 + 1.0), spec)
    x = tf.ones([4, 3])
    for function, value in [(twice[0], 3.0), (twice[1], 3.0), (other, 4.0)]:
        np.testing.assert_array_equal(function(x), np.full([4, 3], value, "float32"))
    # Inside a traced function, which calls both compiled functions of the same name.
    both = tf.function(lambda x: twice[0](x) + twice[1](x) + other(x))
    np.testing.assert_array_equal(both(x), np.full([4, 3], 10.0, "float32"))


def test_names_leave_out_what_changes_from_one_process_to_the_next():
    """A `tf.custom_gradient` op (its gradient's name is a per-process counter) and variables
    updated (the ops that must run are kept in a set, whose order changes): the same content
    traced twice, once after other work, still gets one name."""
    xla_cache_keys.install()

    @tf.custom_gradient
    def doubled(x):
        return x * 2.0, lambda dy: dy * 2.0

    def update(variables):
        def step(x):
            for k, variable in enumerate(variables):
                variable.assign(doubled(x) + float(k))
            return x
        return tf.function(step, jit_compile=True)

    spec = tf.TensorSpec([3], tf.float32)
    first = update([tf.Variable(tf.zeros([3])) for _ in range(8)])
    name = _name(first, spec)
    tf.function(lambda x: doubled(x))(tf.ones([3]))  # another custom gradient in between
    second = [tf.Variable(tf.zeros([3])) for _ in range(8)]
    assert _name(update(second), spec) == name
    update(second)(tf.ones([3]))
    np.testing.assert_array_equal(second[7], np.full([3], 9.0, "float32"))
