"""bert_runner.runs: the one reader of the files a run keeps beside its checkpoints."""
import re

import pytest

from bert_runner.runs import labels as run_labels, record as run_records
from refusals import message


def test_run_json_is_read_beside_a_checkpoint_or_its_seed_directory(tmp_path):
    assert run_records.run_record(str(tmp_path / "ckpt-3")) == (None, None)
    run_records.write_output_dir_record(str(tmp_path), {"task": "ner"})
    (tmp_path / "seed_7").mkdir()
    for checkpoint in (tmp_path, tmp_path / "ckpt-3", tmp_path / "seed_7" / "ckpt-3"):
        assert run_records.run_record(str(checkpoint)) == (
            str(tmp_path / "run.json"), {"task": "ner"})
    # A URL is not a local path (gs:// as file:// here): its seed directory's parent is found.
    url = f"file://{tmp_path}"
    assert run_records.run_record(f"{url}/seed_7/ckpt-3") == (f"{url}/run.json", {"task": "ner"})


@pytest.mark.parametrize("content, says", [
    ('{"task": "ner", ', "is not valid JSON"), ('["ner"]', "is not a JSON object"),
    (b"\xff\xfe{}", "is not valid JSON")])
def test_a_run_json_that_is_not_a_json_object_is_refused_by_every_reader(tmp_path, content,
                                                                        says):
    from bert_runner.runs import checkpoints, supplied
    from bert_runner.serving import provenance

    path = tmp_path / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert message("run-record-unreadable") == "is not valid JSON"
    for read in (run_records.output_dir_record, run_records.run_record, checkpoints.open_checkpoint,
                 run_records.read_record, supplied.of_checkpoint,
                 provenance.recorded_bilstm_on_top):
        with pytest.raises(ValueError, match=re.escape(f"{path} {says}")):
            read(str(tmp_path))


def test_labels_are_written_and_read_back_in_order(tmp_path):
    assert run_labels.recorded_labels(str(tmp_path)) is None
    run_labels.write_label_list(str(tmp_path), ["O", "B-PER", "I-PER"])
    assert run_labels.recorded_labels(str(tmp_path / "ckpt-1")) == ["O", "B-PER", "I-PER"]
    assert run_labels.label_list_path(str(tmp_path)) == str(tmp_path / "label_list.txt")


def test_a_seed_directory_reads_the_label_list_of_its_run(tmp_path):
    """run_ner/run_classifier --seeds write label_list.txt once, in the output_dir: each
    seed_<n> directory's checkpoint reads it there (export_model.py of one seed's run)."""
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "label_list.txt").write_text("O\nB-PER\nI-PER\n")
    seed = tmp_path / "seed_1"
    seed.mkdir()
    (seed / "run.json").write_text("{}")
    assert run_labels.recorded_labels(str(seed)) == ["O", "B-PER", "I-PER"]
    (seed / "label_list.txt").write_text("O\nB-LOC\nI-LOC\n")  # its own, where it has one
    assert run_labels.recorded_labels(str(seed / "ckpt-3")) == ["O", "B-LOC", "I-LOC"]
