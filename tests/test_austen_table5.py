"""experiments.table5: the rows and the flags that make them, and the printed tables (the
command itself, `demo.py --table5`, runs for minutes and is not run here)."""
from experiments import table5


def test_rows_are_the_papers_plus_random_weights():
    assert list(table5.PAPER_ROWS) == [row.name for row in table5.ROWS[:4]]
    assert table5.ROWS[-1].pretraining is None
    assert all(len(values) == len(table5.PAPER_COLUMNS) for values in table5.PAPER_ROWS.values())
    # The paper's figures, as Table 5 prints them (BERT-Base row, SQuAD F1 column).
    assert table5.PAPER_ROWS["BERT (MLM + NSP)"][0] == 84.4
    assert [row[4] for row in table5.PAPER_ROWS.values()] == [88.5, 87.9, 77.8, 84.9]


def test_each_row_is_made_by_its_flags():
    by_name = {row.name: row for row in table5.ROWS}
    no_nsp = dict(by_name["No NSP"].pretraining.data_flags)
    assert no_nsp == {"next_sentence_prediction": False}
    assert dict(by_name["No NSP"].pretraining.pretraining_flags) == no_nsp
    ltr = by_name["LTR & No NSP"].pretraining
    assert dict(ltr.data_flags) == dict(ltr.pretraining_flags) == {"pretraining_objective": "ltr"}
    bilstm = by_name["+ BiLSTM"]
    assert bilstm.pretraining is ltr and dict(bilstm.fine_tuning_flags) == {"bilstm_on_top": True}
    assert by_name["BERT (MLM + NSP)"].pretraining.data_flags == ()
    # Every row writes its fine-tuning outputs to a folder of its own.
    assert len({row.folder for row in table5.ROWS}) == len(table5.ROWS)


def test_tables():
    paper = table5.paper_table().splitlines()
    assert paper[0].split()[-2:] == ["SQuAD", "F1"]
    assert paper[3].startswith("LTR & No NSP") and paper[3].split()[-5:] == [
        "82.1", "84.3", "77.5", "92.1", "77.8"]
    mini = table5.miniature_table({"No NSP": (0.5, 0.75, 61.25),
                                   "BERT (MLM + NSP)": (0.625, None, 70.0)}).splitlines()
    assert len(mini) == 3  # header, then the rows in the table's order; missing rows left out
    assert mini[1].split()[-3:] == ["62.5", "-", "70.0"]  # accuracies in percent, F1 as is
    assert mini[2].startswith("No NSP") and mini[2].split()[-3:] == ["50.0", "75.0", "61.2"]
    # The baselines after the rows, in the table's units already.
    with_baselines = table5.miniature_table(
        {"No NSP": (0.5, 0.75, 61.25)},
        [("majority label", [25.0, 50.0, 12.5]), ("a simple rule", [40.0, None, None])])
    assert [line.split()[-3:] for line in with_baselines.splitlines()[2:]] == [
        ["25.0", "50.0", "12.5"], ["40.0", "-", "-"]]
    assert with_baselines.splitlines()[2].startswith("Baseline: majority label")
