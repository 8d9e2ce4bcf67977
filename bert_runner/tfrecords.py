"""TFRecord writing for the tasks: `tf.train.Feature` values (the original's `create_int_feature`
and `create_float_feature`) and the one writer every split goes through; reading is
`bert_runner.inputs.decode_record`."""
import tensorflow as tf

from modeling.checkpoint.files import atomic_output


def int_feature(values):
    """An int64 list feature of the ints `values`."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
    """A float (32-bit) list feature of `values`."""
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def write_records(path, records, padding=None, multiple=1):
    """Writes the `tf.train.Example`s `records` to the TFRecord `path` through a temporary name
    (a failed run leaves no half-written file), then copies of `padding` up to a multiple of
    `multiple` records (TPU evaluation and prediction need full batches).

    Returns:
      (number of records, number of padding records).
    """
    count = num_padding = 0
    with atomic_output(path) as tmp_path:
        with tf.io.TFRecordWriter(tmp_path) as writer:
            for record in records:
                writer.write(record.SerializeToString())
                count += 1
            if padding is not None:
                num_padding = -count % multiple
                serialized = padding.SerializeToString()
                for _ in range(num_padding):
                    writer.write(serialized)
    return count, num_padding
