"""SQuAD's exports serve each group of windows at its own length by default: on trained
weights, SQuAD v1.1 and v2.0, their answers are those of --full_width_windows (run_squad.py's
windows), and their n-best texts too wherever run_squad.py's n-best drew no padding position
(docs/export.md says when it does). Large tier: two trainings."""
import numpy as np
import pytest

from test_run_squad import TINY, WINDOW_FLAGS, run_squad, squad_data, write_json

pytestmark = pytest.mark.large


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_the_default_windows_answer_as_run_squads(version, tmp_path):
    from bert_runner.serving import predictor
    from bert_tasks.squad.answers import answers
    from bert_tasks.squad.raw_text import PADDED_LOGIT
    from test_export import export_run

    v2 = version == "2.0"
    train = write_json(tmp_path / "train.json",
                       squad_data(192, seed=1, impossible_every=4 if v2 else 0)[0])
    dev, _ = squad_data(40, seed=2, impossible_every=4 if v2 else 0)
    run = tmp_path / "run"
    proc = run_squad(f"--bert_config_file={TINY / 'bert_config.json'}",
                     f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--do_train=True",
                     f"--train_file={train}", "--train_batch_size=16", "--learning_rate=1e-3",
                     "--num_train_epochs=16", f"--output_dir={run}",
                     *(["--version_2_with_negative=True"] if v2 else []), *WINDOW_FLAGS)
    assert proc.returncode == 0, proc.stdout[-5000:]
    # Served at the model's 64 positions, whose windows hold a context's 40 words whole: more
    # real positions than --n_best_size, as SQuAD's 384-wide windows have (docs/export.md).
    flags = dict(max_seq_length=64, doc_stride=32, max_query_length=8,
                 version_2_with_negative=v2)
    exports = {full: predictor.Predictor(export_run(run, "squad", tmp_path / f"export_{full}",
                                                    str(TINY / "vocab.txt"),
                                                    full_width_windows=full, **flags))
               for full in (True, False)}
    inputs = [f"{qa['question']}\t{paragraph['context']}"
              for paragraph in dev["data"][0]["paragraphs"] for qa in paragraph["qas"]]
    questions, contexts = (list(texts) for texts in zip(*(t.split("\t") for t in inputs)))
    outputs = {full: export._call("serving_default", question=questions, context=contexts)
               for full, export in exports.items()}
    found = {full: answers(questions, contexts, outputs[full], exports[full].metadata)
             for full in exports}
    # The answers: the same text at the same characters.
    assert [(a.text, a.start, a.end) for a in found[False]] == [
        (a.text, a.start, a.end) for a in found[True]]
    assert sum(bool(a.text) for a in found[False]) >= (25 if v2 else 35)  # trained: answers
    # The n-best lists are the same wherever run_squad's n-best drew no padding: no window's
    # top --n_best_size start or end logits were past its last real position.
    n_best = exports[True].metadata["n_best_size"]
    padding = outputs[False]["start_logits"] == PADDED_LOGIT  # [N, windows, S]
    drew_padding = []
    for i in range(len(inputs)):
        drew = False
        for k in range(int(outputs[True]["window_count"][i])):
            for name in ("start_logits", "end_logits"):
                top = np.argsort(-outputs[True][name][i, k], kind="stable")[:n_best]
                drew |= bool(padding[i, k, top].any())
        drew_padding.append(drew)
    # (This tiny model's padding logits rank among its windows' top 20 for most questions, so
    # their n-best tails differ there: the spans run_squad.py's n-best lacks.)
    for i in (i for i, drew in enumerate(drew_padding) if not drew):
        texts = [[entry["text"] for entry in found[full][i].nbest] for full in (False, True)]
        assert texts[0] == texts[1], i
        assert found[False][i].probability == pytest.approx(found[True][i].probability, abs=1e-4)
