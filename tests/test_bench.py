"""A tiny-size run of every benchmark (bench/, `python -m bench.NAME`): it exits 0 and appends its
figures to --results_jsonl as JSON lines (bench/harness.py). Large tier, where the peers' packages
are installed (tests/requirements-large.txt); a bench that reads a Hugging Face model gets a tiny
random one, so no download is needed.

Each bench is forked from the tests' script server (tests/forked_scripts.py), and so are the
scripts it starts with subprocess.run (our runs, the peer's process, predict.py): each would
otherwise import TensorFlow afresh. Popen stays the real one: bench/lora.py reads its child's
resource usage (os.wait4), which a forked script is not."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from modeling_helpers import TINY, tiny_config
from ner_helpers import write_conll_dir
from optional_packages import needs

pytestmark = pytest.mark.large

KEYS = {"bench", "time", "argv", "machine", "versions", "figures"}
# `python -c BOOT bench.NAME ARGS...`: runs the bench as `python -m bench.NAME ARGS...` would,
# with subprocess.run forking the scripts it starts (module docstring).
BOOT = ("import runpy, subprocess, sys; sys.path.insert(0, 'tests'); import forked_scripts; "
        "subprocess.run = forked_scripts.run; "
        "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


PEERS = needs("torch", "transformers")
# Each bench's smallest run through its own flags. "{hf_dir}", "{tagger}": the fixtures below,
# "{tmp}": the test's folder.
BENCHES = [
    pytest.param("encoder", ["--config=tiny", "--batch_size=2", "--seq_length=16", "--repeats=1",
                             "--warmup=0", "--modes=function", "--precisions=float32",
                             "--nobf16_weights"], marks=PEERS),
    pytest.param("accelerators", ["--config=tiny", "--steps=2", "--contenders=" + ",".join([
        "ours bf16", "ours bf16 host-fed", "peer compiled bf16", "peer compiled bf16 masked-head",
        "peer eager bf16", "ours bf16 unfused", "ours bf16 no-attention-dropout", "ours fp32"])],
        marks=[PEERS, needs("jax")]),
    pytest.param("pretraining", ["--config=tiny", "--batch_size=2", "--seq_length=16",
                                 "--max_predictions_per_seq=2", "--steps=1", "--repeats=1",
                                 "--warmup=0", "--num_batches=1", "--modes=function",
                                 "--precisions=float32", "--workdir={tmp}"], marks=PEERS),
    pytest.param("electra_pretraining", [
        "--hidden_size=32", "--num_layers=1", "--num_heads=2", "--intermediate_size=64",
        "--embedding_size=16", "--vocab_size=2000", "--batch_size=2", "--seq_length=16",
        "--max_predictions_per_seq=2", "--steps=1", "--repeats=1", "--warmup=0",
        "--num_batches=1", "--precisions=float32", "--peer_heads=all", "--workdir={tmp}"],
        marks=PEERS),
    pytest.param("serving", ["--config=tiny", "--tasks=classifier", "--inputs=4",
                             "--calibration_inputs=2", "--batch_size=2", "--repeats=1",
                             "--warmup=0", "--litert=", "--onnx=float32", "--nobfloat16",
                             "--first_answer_runs=1"],
                 marks=[PEERS, needs("tf2onnx", "onnx", "onnxruntime")]),
    pytest.param("serving_profile", ["--config=tiny", "--sentences=2", "--repeats=1",
                                     "--max_seq_length=32", "--export_dir={tmp}/saved_model",
                                     "--noop_stats"]),
    pytest.param("finetuning", ["--model_dir={hf_dir}", "--train_examples=8", "--dev_examples=4",
                                "--epochs=1", "--batch_size=4", "--max_seq_length=32",
                                "--precisions=float32"], marks=PEERS),
    pytest.param("ner_seeds", ["--model_dir={hf_dir}", "--seeds=1", "--schemes=IOB2",
                               "--chapters=1,1", "--workdir={tmp}/work"], marks=PEERS),
    pytest.param("sentence_embeddings", [
        "--model_dir={hf_dir}", "--train_pairs=8", "--eval_pairs=4", "--seeds=1",
        "--batch_size=4", "--max_seq_length=32"], marks=[
            needs("sentence_transformers", "datasets", "accelerate")]),  # the peer's trainer
    pytest.param("lora", ["--model_dir={hf_dir}", "--train_examples=8", "--dev_examples=4",
                          "--epochs=1", "--batch_size=4", "--max_seq_length=32", "--seeds=1"]),
    # run_classifier.py's batch of 32: one step.
    pytest.param("distillation", ["--model_dir={hf_dir}", "--train_examples=32",
                                  "--dev_examples=4", "--unlabeled_examples=32", "--epochs=1",
                                  "--seeds=1", "--student_layers=1"]),
    pytest.param("classifier_long_documents", ["--work_dir={tmp}/work", "--passage_words=60",
                                               "--name_free_words=10", "--max_passages=32",
                                               "--max_seq_length=32", "--doc_stride=16",
                                               "--num_train_epochs=1"]),
    pytest.param("create_pretraining_data", ["--input=data/austen/northangerabbey.txt",
                                             "--repeats=1", "--skip_port"]),
    pytest.param("beam_pipelines", ["--input=data/austen/northangerabbey.txt", "--repeats=1",
                                    "--dupe_factor=1", "--workers=1"],
                 marks=needs("apache_beam")),
    pytest.param("dynamic_masking", ["--novel=northangerabbey.txt", "--max_seq_length=32",
                                     "--max_predictions_per_seq=4", "--batch_size=4",
                                     "--batches=2", "--repeats=1", "--train_steps=1",
                                     "--num_layers=1", "--hidden_size=64"]),
    pytest.param("export_accuracy", [  # the tiny encoder's sentence vectors: no classifier needed
        f"--checkpoint={TINY / 'bert_model.ckpt'}",
        f"--bert_config_file={TINY / 'bert_config.json'}", f"--vocab_file={TINY / 'vocab.txt'}",
        "--pooling=mean", "--task_name=cola",
        f"--data_dir={ROOT / 'tests' / 'fixtures' / 'classifier' / 'data' / 'CoLA'}",
        "--max_seq_length=32", "--max_rows=8", "--quantizations=", "--nobfloat16", "--noonnx"]),
    pytest.param("fused_kernels", ["--rows=64", "--width=32", "--heads=2", "--batch_size=2",
                                   "--seq_length=16", "--precisions=float32", "--repeats=1"]),
    pytest.param("packing", ["--input=tests/fixtures/pretraining_data/corpus.txt",
                             "--config=tiny", "--seq_lengths=64",
                             "--tokens_per_batch=256", "--steps=1", "--repeats=1"]),
    pytest.param("recompute", ["--config=tiny", "--batch_size=1", "--seq_length=16",
                               "--steps=1"]),
    pytest.param("squad_windows", ["--input=data/austen/northangerabbey.txt", "--questions=20",
                                   "--repeats=1"]),
    pytest.param("tokenization", ["--input=data/austen/northangerabbey.txt", "--max_lines=200",
                                  "--batch_size=64", "--repeats=1"],
                 marks=needs("transformers")),  # its peer: tokenizers, which transformers needs
    pytest.param("task_export_accuracy", ["--task=ner", "--data_dir={tagger}/data",
                                          "--checkpoints={tagger}/run",
                                          "--formats=SavedModel float32", "--max_inputs=4"]),
    pytest.param("vocab_quality", ["--input=tests/fixtures/pretraining_data/c*.txt",
                                   "--held_out=commands.txt", "--vocab_size=300",
                                   "--num_unused=10", "--min_count=2", "--seeds=1", "--peer"]),
]

# Each bench is its own xdist group (tests/conftest.py), so the benches spread over the processes
# instead of running one after another on one of them.
BENCHES = [pytest.param(*bench.values, marks=[*bench.marks,
                                              pytest.mark.xdist_group(f"bench.{bench.values[0]}")])
           for bench in BENCHES]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """The tiny fixture encoder's shape with 128 positions (bench/ner_seeds.py runs run_ner.py at
    128), random weights, in Hugging Face's layout with sentence-transformers' files."""
    import numpy as np

    from modeling import BertModel
    from modeling.checkpoint.hugging_face import save_hf_model

    config = tiny_config()
    config.max_position_embeddings = 128
    model = BertModel(config)
    ids = np.ones((1, 8), np.int32)
    model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})  # builds the weights
    return save_hf_model(model, tmp_path_factory.mktemp("hf") / "tiny", TINY / "vocab.txt", True,
                         sentence_embedding=("mean", False, 32))


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    """A run_ner.py run (one step from the tiny fixture checkpoint) and its CoNLL data: the
    folder holding `run` and `data`."""
    folder = tmp_path_factory.mktemp("tagger")
    data_dir = write_conll_dir(folder / "data", train_documents=2, dev_documents=1)
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_ner.py"),
         f"--bert_config_file={TINY / 'bert_config.json'}", f"--vocab_file={TINY / 'vocab.txt'}",
         f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
         "--max_seq_length=32", f"--data_dir={data_dir}", "--do_train=True",
         "--train_batch_size=8", "--num_train_epochs=1", f"--output_dir={folder / 'run'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.parametrize("name, args", BENCHES)
def test_bench_runs_and_writes_its_figures(name, args, tmp_path, request):
    values = {"tmp": tmp_path}
    for fixture in ("hf_dir", "tagger"):
        if any("{%s}" % fixture in arg for arg in args):
            values[fixture] = request.getfixturevalue(fixture)
    results = tmp_path / "results.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", BOOT, f"bench.{name}", *(arg.format(**values) for arg in args),
         f"--results_jsonl={results}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    lines = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    assert lines, result.stdout[-2000:]
    for line in lines:
        assert set(line) == KEYS and line["bench"] == name
        assert line["figures"] and line["versions"]["python"] and line["machine"]["cores"]
    assert f"JSON lines appended to {results}" in result.stdout
    if name == "serving":
        _check_engine_figures([line["figures"] for line in lines])
    if name == "accelerators":
        _check_accelerator_rows([line["figures"] for line in lines])


def _check_accelerator_rows(rows):
    """bench.accelerators' contenders, every one run: ours fed on the device and from the host (the
    scripts' loop), the same step and batches, so the same losses; the peer's MLM head at every
    position and at the masked ones, the same model and weights, so the same losses too."""
    by_name = {row["contender"]: row for row in rows}
    assert not [row for row in rows if "error" in row], rows
    assert {row["input"] for row in rows if row["contender"].startswith("ours")} == {
        "device", "host"}
    assert {row["mlm_head"] for row in rows if row["contender"].startswith("peer")} == {
        "all", "masked"}
    for one, other in [("ours bf16", "ours bf16 host-fed"),
                       ("peer compiled bf16", "peer compiled bf16 masked-head")]:
        assert by_name[other]["losses"] == pytest.approx(by_name[one]["losses"], rel=1e-3)


def _check_engine_figures(rows):
    """bench.serving's batch-1 rows: ONNX Runtime's has the engine's part of its calls (less than
    the whole call) and the ceiling it sets; the SavedModel's and the peer's, no engine, none."""
    latency = {row["contender"]: row for row in rows if "p50_ms" in row}
    onnx = latency.pop("ONNX Runtime float32")
    assert 0 < onnx["engine_p50_ms"] < onnx["p50_ms"]
    assert onnx["engine_ceiling_vs_baseline"] == pytest.approx(
        onnx["p50_vs_baseline"] * onnx["p50_ms"] / onnx["engine_p50_ms"])
    assert set(latency) == {"SavedModel (default)", "HF pipeline"}
    assert not any("engine_p50_ms" in row for row in latency.values())
