"""TFRecord input pipelines with the original scripts' semantics, for any `tf.distribute` strategy."""
import tensorflow as tf


def decode_record(record, name_to_features):
    """Parses one `tf.train.Example`; int64 features become int32 (TPUs lack int64), as the original."""
    return _int32(tf.io.parse_single_example(record, name_to_features))


def decode_batch(records, name_to_features):
    """`decode_record` of a batch of serialized examples (`[batch]` strings): one parse for the
    batch, each feature `[batch, ...]`."""
    return _int32(tf.io.parse_example(records, name_to_features))


def _int32(example):
    return {
        name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
        for name, value in example.items()
    }


def tfrecord_dataset(
    files,
    name_to_features,
    batch_size,
    is_training,
    input_context=None,
    seed=None,
    shuffle_buffer=100,
    drop_remainder=True,
    repeat=None,
):
    """The original `input_fn_builder`s as a `tf.data.Dataset` of feature dicts.

    Training: repeat, shuffle the files, interleave up to 4 of them, shuffle(shuffle_buffer)
    records, batch with drop_remainder — the original's semantics, except that the interleave is
    deterministic for a given seed (the original's was "sloppy"), so runs are reproducible and
    resumable. Evaluation/prediction: the records in file order.

    Multi-worker: with at least one file per input pipeline, each pipeline reads its share of
    the files (the original's per-host sharding); otherwise every pipeline reads the same seeded
    stream and keeps every n-th record, so a global batch holds the same examples whatever the
    number of workers.

    Args:
        batch_size: the per-replica batch size (from `input_context` when distributing).
        repeat: repeat the data forever; defaults to `is_training`.
    """
    repeat = is_training if repeat is None else repeat
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines

    filenames = tf.data.Dataset.from_tensor_slices(list(files))
    if shard_files:
        filenames = filenames.shard(num_pipelines, pipeline_id)
    if is_training:
        filenames = filenames.repeat()
        filenames = filenames.shuffle(len(files), seed=seed)
        d = filenames.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(4, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        d = d.shuffle(shuffle_buffer, seed=seed)
    else:
        d = filenames.flat_map(tf.data.TFRecordDataset)
        if repeat:
            d = d.repeat()
    if num_pipelines > 1 and not shard_files:
        d = d.shard(num_pipelines, pipeline_id)
    # Parsed as batches: one parse op per batch instead of one per record, whose per-op cost
    # bounded a core's records/s (bench/input_pipeline.py). Not converted by autograph (plain
    # TensorFlow ops): converting costs start-up time.
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    d = d.map(
        tf.autograph.experimental.do_not_convert(
            lambda records: decode_batch(records, name_to_features)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return d.prefetch(tf.data.AUTOTUNE)
