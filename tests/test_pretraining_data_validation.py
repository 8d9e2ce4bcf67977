"""bert_tasks.pretraining.data.validation.check_records: each file's first record against flags and model."""
import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import pipeline
from bert_tasks.pretraining.data.reading import InputError
from bert_tasks.pretraining.data.validation import check_records
import vocab


@pytest.fixture(scope="module")
def records(fixtures_dir):
    return str(fixtures_dir / "pretraining_data" / "pretrain_default.tfrecord")


@pytest.fixture(scope="module")
def no_nsp_records(tmp_path_factory, fixtures_dir):
    path = tmp_path_factory.mktemp("no_nsp") / "no_nsp.tfrecord"
    pipeline.write_records(pipeline.Options(
        input_file=str(fixtures_dir / "pretraining_data" / "tiny_corpus.txt"),
        output_file=str(path), vocab_file=vocab.bundled_vocab_file(), dupe_factor=1,
        next_sentence_prediction=False))
    return str(path)


def _write(path, examples):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            writer.write(example)
    return str(path)


def test_fitting_records(records, no_nsp_records):
    info = check_records([records], 128, 20, 30522, type_vocab_size=2)
    assert info.next_sentence and info.empty_files == ()
    assert not check_records([no_nsp_records], 128, 20, 30522).next_sentence


@pytest.mark.parametrize("args,message", [
    ((64, 20, 30522), r"pretrain_default\.tfrecord: first record: input_ids has 128 values but "
                      r"--max_seq_length=64: set --max_seq_length=128"),
    ((128, 16, 30522), r"masked_lm_positions has 20 values but --max_predictions_per_seq=16: "
                       r"set --max_predictions_per_seq=20"),
    ((128, 20, 1000), r"input_ids holds token id \d+ but the model config's vocab_size is 1000"),
])
def test_mismatch_names_file_value_and_flag(records, args, message):
    with pytest.raises(InputError, match=message):
        check_records([records], *args)


def test_segment_ids_beyond_type_vocab_size(records):
    with pytest.raises(InputError, match="segment_ids holds 1 but the model config's "
                                         "type_vocab_size is 1"):
        check_records([records], 128, 20, 30522, type_vocab_size=1)


def test_files_without_records(tmp_path, records, caplog):
    empty = [_write(tmp_path / name, []) for name in ("a.tfrecord", "b.tfrecord")]
    with pytest.raises(InputError, match=r"input files .*a\.tfrecord, .*b\.tfrecord hold no "
                                         r"records"):
        check_records(empty, 128, 20, 30522)
    caplog.set_level("WARNING")
    info = check_records([records] + empty[:1], 128, 20, 30522)
    assert info.empty_files == (empty[0],)
    assert any("a.tfrecord holds no records" in m for m in caplog.messages)


def test_not_pretraining_records(tmp_path, records):
    text = tmp_path / "corpus.txt"
    text.write_text("Not a TFRecord file at all, just some text.\n" * 3)
    with pytest.raises(InputError, match=r"corpus\.txt: not an uncompressed TFRecord file"):
        check_records([str(text)], 128, 20, 30522)
    not_example = _write(tmp_path / "bytes.tfrecord", [b"\xff\xff\xff"])
    with pytest.raises(InputError, match=r"bytes\.tfrecord: the first record is not a "
                                         r"tf.train.Example"):
        check_records([not_example], 128, 20, 30522)
    with pytest.raises(InputError, match=r"missing\.tfrecord: cannot read it"):
        check_records([str(tmp_path / "missing.tfrecord")], 128, 20, 30522)
    ids = tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 128))
    classifier = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": ids, "input_mask": ids, "segment_ids": ids, "label_ids": ids}))
    path = _write(tmp_path / "classifier.tfrecord", [classifier.SerializeToString()])
    with pytest.raises(InputError, match=r"classifier\.tfrecord: first record: lacks "
                                         r"masked_lm_positions, masked_lm_ids, masked_lm_weights"):
        check_records([path], 128, 20, 30522)


def test_next_sentence_labels_must_agree(records, no_nsp_records):
    with pytest.raises(InputError, match="some input files have next_sentence_labels"):
        check_records([records, no_nsp_records], 128, 20, 30522)
    with pytest.raises(InputError, match=r"no_nsp\.tfrecord: the records have no "
                                         r"next_sentence_labels"):
        check_records([no_nsp_records], 128, 20, 30522, next_sentence=True)
