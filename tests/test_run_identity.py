"""bert_runner.run_identity: what a run is, by content, and what two runs differ in."""
import dataclasses
import json
import os

import pytest
import tensorflow as tf

from bert_runner import run_identity


def test_a_fingerprint_follows_the_content_not_the_path(tmp_path):
    text = tmp_path / "train.tsv"
    text.write_text("a\tb\n")
    first = run_identity.fingerprint(str(text))
    copy = tmp_path / "copy.tsv"
    copy.write_text("a\tb\n")
    assert run_identity.fingerprint(str(copy)) == first
    text.write_text("a\tc\n")  # edited in place: another run's data
    os.utime(text, ns=(1, 1))
    assert run_identity.fingerprint(str(text)) not in (first, None)
    assert run_identity.fingerprint(str(tmp_path / "missing")) is None
    # A checkpoint prefix by its index (which holds every tensor's checksum); an output_dir by its
    # newest checkpoint; a model folder by its files.
    variable = tf.Variable([1.0, 2.0])
    checkpoint = tf.train.Checkpoint(v=variable)
    prefix = checkpoint.save(str(tmp_path / "run" / "ckpt"))
    assert run_identity.fingerprint(str(tmp_path / "run")) == run_identity.fingerprint(prefix)
    variable.assign([1.0, 3.0])
    newer = checkpoint.save(str(tmp_path / "run" / "ckpt"))
    assert run_identity.fingerprint(newer) != run_identity.fingerprint(prefix)
    assert run_identity.fingerprint(str(tmp_path / "run")) == run_identity.fingerprint(newer)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    before = run_identity.fingerprint(str(folder))
    (folder / "config.json").write_text('{"hidden_size": 8}')
    assert run_identity.fingerprint(str(folder)) != before


@dataclasses.dataclass
class _Example:
    text: str
    label: str


class _Opaque:
    pass


def test_examples_are_hashed_by_their_content_in_order():
    examples = [_Example("a dog", "1"), _Example("a cat", "0")]
    assert (run_identity.examples_sha256(examples)
            == run_identity.examples_sha256([_Example("a dog", "1"), _Example("a cat", "0")]))
    assert (run_identity.examples_sha256(examples)
            != run_identity.examples_sha256(examples[::-1]))
    with pytest.raises(TypeError, match="_Opaque has no repr of its content"):
        run_identity.examples_sha256([_Opaque()])


def test_differences_name_what_both_records_hold():
    recorded = {"task": "classifier/mrpc", "random_seed": 12345, "train_data_sha256": "aa",
                "train_examples": 64, "learning_rate": 2e-5}
    current = {"task": "classifier/mrpc", "random_seed": 1, "train_data_sha256": "bb",
               "train_examples": 48, "lora_rank": 0}
    assert run_identity.differences(recorded, current) == [
        "random_seed 12345 -> 1", "the training data differs", "training examples 64 -> 48"]
    # A record written before a setting was recorded is not checked for it (lora_rank).
    assert run_identity.differences(recorded, current, names={"task", "lora_rank"}) == []
    # The same starting checkpoint at another path is the same run; other content is not.
    moved = {"init_checkpoint": "/a/ckpt", "init_checkpoint_sha256": "cc"}
    assert run_identity.differences(moved, {**moved, "init_checkpoint": "ckpt"}) == []
    assert run_identity.differences(moved, {"init_checkpoint": "ckpt",
                                            "init_checkpoint_sha256": "dd"}) == [
        "init_checkpoint '/a/ckpt' -> 'ckpt'", "the starting checkpoint's content differs"]


def test_a_starting_directory_is_taken_at_the_checkpoint_the_run_started_from(tmp_path):
    """--init_checkpoint=<a pre-training output_dir>: its newer checkpoints, written while the
    fine-tuning ran, do not make the same command another run; other content at the recorded
    checkpoint does."""
    variable = tf.Variable([1.0])
    checkpoint = tf.train.Checkpoint(v=variable)
    first = checkpoint.save(str(tmp_path / "pretraining" / "ckpt"))

    from bert_runner.run_config import RunConfig

    class Task:
        name, max_seq_length = "classifier/mrpc", 128

        def recorded_settings(self):
            return {}

    run = RunConfig(output_dir=str(tmp_path / "out"),
                    init_checkpoint=str(tmp_path / "pretraining"))
    recorded = run_identity.of(Task(), run)
    assert recorded[run_identity.INIT_PREFIX] == first
    variable.assign([2.0])
    checkpoint.save(str(tmp_path / "pretraining" / "ckpt"))
    newer = run_identity.of(Task(), run)
    assert newer[run_identity.INIT_PREFIX] != first
    assert newer["init_checkpoint_sha256"] != recorded["init_checkpoint_sha256"]
    assert run_identity.differences(recorded, newer) == []
    assert run_identity.differences({**recorded, "init_checkpoint_sha256": "00"}, newer) == [
        "the starting checkpoint's content differs"]


def test_a_config_is_known_by_its_values_not_its_file(tmp_path):
    from modeling import BertConfig

    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=37)
    (tmp_path / "a.json").write_text(config.to_json_string())
    (tmp_path / "b.json").write_text(json.dumps(config.to_dict(), indent=7, sort_keys=True))
    a, b = (BertConfig.from_json_file(str(tmp_path / n)) for n in ("a.json", "b.json"))
    assert run_identity.config_sha256(a) == run_identity.config_sha256(b)
    b.hidden_dropout_prob = 0.3
    assert run_identity.config_sha256(a) != run_identity.config_sha256(b)
    # A hash a command could not compute (no config at hand) is not a difference.
    assert run_identity.differences({"bert_config_sha256": "aa"}, {"bert_config_sha256": None}) == []
