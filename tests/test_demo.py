"""demo.py: the quick pipeline runs every stage's CLI and writes their outputs; the bundled SQuAD
files are what the demo's generator makes; the work folder is never one it did not make."""
import json
import os
import subprocess
import sys

import pytest

from conftest import QUICK_DEMO_GROUP, ROOT

STAGE_SCRIPTS = ["build_vocab.py", "create_pretraining_data.py", "run_pretraining.py",
                 "run_classifier.py", "run_squad.py", "run_swag.py", "run_ner.py",
                 "extract_features.py"]


def run_demo(*args, env=None):
    """Runs demo.py from the repository root, with DEMO_QUICK unset unless `env` sets it."""
    base = {k: v for k, v in os.environ.items() if k != "DEMO_QUICK"}
    return subprocess.run([sys.executable, "demo.py", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**base, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})},
                          timeout=600)


@pytest.mark.large
@pytest.mark.xdist_group(QUICK_DEMO_GROUP)  # shares conftest.quick_demo
def test_quick_demo_runs_every_stage(quick_demo):
    # The README's command (conftest.quick_demo), run over an earlier demo's folder: cleared.
    result, out = quick_demo
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    log = result.stdout
    assert not (out / "stale.txt").exists()
    for script in STAGE_SCRIPTS:
        assert f"$ python {script} --" in log, script
        assert (out / "logs" / script.replace(".py", ".log")).exists()
    assert "step 4/4" in log  # training progress is shown
    assert "All 10 stages done" in log
    # Each stage's outputs, as the summary says. The vocabulary is learned from the corpus and
    # sets the config's vocab_size.
    vocab = (out / "vocab.txt").read_text().splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(vocab) <= 400
    assert json.loads((out / "bert_config.json").read_text())["vocab_size"] == len(vocab)
    assert "masked_lm_accuracy" in (out / "pretraining" / "eval_results.txt").read_text()
    assert (out / "pretraining" / "bert_model.ckpt.index").exists()
    assert "eval_accuracy" in (out / "classifier" / "eval_results.txt").read_text()
    submission = (out / "classifier" / "SST-2.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 1 + 16
    scores = json.loads((out / "squad" / "eval_results.json").read_text())
    assert set(scores) == {"exact_match", "f1"}
    assert len(json.loads((out / "squad" / "predictions.json").read_text())) == 8
    assert "eval_accuracy" in (out / "swag" / "eval_results.txt").read_text()
    swag_test = (out / "swag" / "test_results.tsv").read_text().splitlines()
    assert len(swag_test) == 8 and all(len(line.split("\t")) == 4 for line in swag_test)
    assert "(8 examples; chance 0.250, word overlap " in log
    for ner in (out / "names_and_places_ner", out / "random_init" / "names_and_places_ner"):
        assert "eval_f1_PER" in (ner / "eval_results.txt").read_text()
        assert (ner / "eval_predictions.txt").read_text().startswith("-DOCSTART- O O\n")
    assert "baselines: every word O 0.0, capitalised words as PER " in log
    # The tagger fine-tuned again from random weights: the same command without
    # --init_checkpoint, its outputs in random_init/; both F1 printed side by side.
    commands = [line for line in log.splitlines() if "$ python run_ner.py" in line]
    assert len(commands) == 2 and "--init_checkpoint=" in commands[0]
    init = commands[0].split("--init_checkpoint=")[1].split()[0]
    assert commands[1].replace("random_init/", "") == commands[0].replace(
        f" --init_checkpoint={init}", "")
    assert "pre-training adds" in log
    features = [json.loads(line) for line in (out / "features.jsonl").read_text().splitlines()]
    assert [f["linex_index"] for f in features] == [0, 1, 2]
    assert features[0]["features"][0]["token"] == "[CLS]"
    assert [layer["index"] for layer in features[0]["features"][0]["layers"]] == [-1, -2]
    assert len(features[0]["features"][0]["layers"][0]["values"]) == 128


def test_demo_quick_environment_variable():
    assert "(default: 'true')" in run_demo("--helpshort", env={"DEMO_QUICK": "1"}).stdout
    assert "(default: 'false')" in run_demo("--helpshort", env={"DEMO_QUICK": ""}).stdout


def test_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    result = run_demo("--quick", f"--output_dir={tmp_path}")
    assert result.returncode != 0
    assert "is not empty and not an earlier demo's folder" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["mine.txt"]


def test_bundled_squad_data_is_the_generators_and_consistent(tmp_path):
    result = run_demo(f"--write_squad_data={tmp_path}")
    assert result.returncode == 0, result.stderr
    total_size = 0
    for split in ("train", "dev"):
        bundled = ROOT / "data" / "austen_squad" / f"{split}-v1.1.json"
        assert (tmp_path / bundled.name).read_bytes() == bundled.read_bytes(), bundled
        total_size += bundled.stat().st_size
        dataset = json.loads(bundled.read_text(encoding="utf-8"))
        for article in dataset["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    answer = qa["answers"][0]
                    start = answer["answer_start"]
                    assert paragraph["context"][start:start + len(answer["text"])] == answer["text"]
                    assert qa["question"].endswith("?") and "who" in qa["question"].lower()
    assert total_size < 200_000


def test_electra_budget_and_table():
    # experiments.electra's arithmetic and table on made-up results (`demo.py --electra` itself
    # pre-trains for many minutes and is not run here).
    from experiments import electra

    # The first log line (start and tracing included) is left out of the per-step time.
    assert electra.cpu_seconds_per_step([(20, 9.0), (60, 13.0), (120, 19.0)]) == 0.1
    with pytest.raises(ValueError):
        electra.cpu_seconds_per_step([(20, 9.0)])
    assert electra.steps_for_budget(240, 0.15) == 1600
    assert electra.steps_for_budget(1, 0.5, minimum=4) == 4
    bert = {"vocab_size": 2000, "hidden_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 256, "hidden_act": "gelu"}
    config = electra.electra_config(bert)
    assert {k: config[k] for k in bert} == bert  # the discriminator is the BERT model
    assert (config["embedding_size"], config["generator_hidden_size"]) == (128, 0.25)

    results = {
        "ELECTRA": {"next_sentence": [0.30, 0.34, 0.32], "which_novel": [0.7, 0.72, 0.74],
                    "who_questions": [60.0, 62.0, 64.0], "names_places": [70.0, 72.0, 74.0]},
        "BERT (MLM + NSP)": {"next_sentence": [0.30, 0.30, 0.30], "which_novel": [0.7, 0.7, 0.7],
                             "who_questions": [60.0, 60.0, 60.0],
                             "names_places": [70.0, 70.0, 70.0]},
        "No pre-training": {"next_sentence": [0.25, 0.25, 0.25]},
    }
    table = electra.results_table(results, [("majority label", {
        "next_sentence": 27.0, "which_novel": 50.0, "who_questions": 10.0, "names_places": 0.0})])
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    assert rows[0][-1] == "mean of the tasks" and len(rows) == 2 + 3 + 1 + 1
    # Rows in the table's order; accuracies in percent; mean ± sample std over the seeds.
    assert rows[2][:2] == ["BERT (MLM + NSP)", "30.0 ± 0.0"]
    # The mean of the tasks per seed: 57.5, 60.0, 61.0.
    assert rows[3] == ["ELECTRA", "32.0 ± 2.0", "72.0 ± 2.0", "62.0 ± 2.0", "72.0 ± 2.0",
                       "59.5 ± 1.8"]
    assert rows[4][1:3] == ["25.0 ± 0.0", "-"] and rows[4][-1] == "-"  # incomplete row
    # The difference ± its standard error: sqrt(2²/3 + 0²/3) = 1.15.
    assert rows[5][:2] == ["ELECTRA − BERT (± s.e.)", "+2.0 ± 1.2"]
    assert rows[6] == ["*majority label*", "27.0", "50.0", "10.0", "0.0", "21.8"]
    paper = electra.paper_table().splitlines()
    assert paper[2].split("|")[1:-1] == [" Small ", " 75.1 ", " 79.9 ", " +4.8 "]
