"""`tf.train.Feature` values of the tasks' TFRecord writers (the original's `create_int_feature`
and `create_float_feature`); reading is `bert_runner.inputs.decode_record`."""
import tensorflow as tf


def int_feature(values):
    """An int64 list feature of the ints `values`."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
    """A float (32-bit) list feature of `values`."""
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))
