"""The table of bad inputs in docs/errors.md, for the tests that keep it true.

Each row of the table is a case: an id, the bad input, and a fragment of what the user sees,
word for word (in backticks). A test that makes the case checks the script's output with
`assert_refused(process, case)` (exit code 2, one line, no traceback) or takes the fragment with
`message(case)` (an exception's text, a warning). tests/test_refusals_table.py checks that every
row is named by some test.
"""
import re

from conftest import ROOT

TABLE = ROOT / "docs" / "errors.md"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|[^|]*\| (.*) \|$")


def cases():
    """{case id: the message fragment of its row}."""
    found = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            seen = re.findall(r"`([^`]+)`", match.group(2))
            assert len(seen) == 1, f"{TABLE}: row {match.group(1)} needs one `fragment`"
            found[match.group(1)] = seen[0]
    return found


def message(case):
    """The fragment of the user's message for `case` (a row of docs/errors.md)."""
    table = cases()
    assert case in table, f"no row `{case}` in {TABLE}"
    return table[case]


def assert_refused(process, case):
    """`process` (a finished subprocess.CompletedProcess, text mode) was refused as `case` says:
    exit code 2, the row's fragment on stderr, no Python traceback."""
    stderr = process.stderr
    assert process.returncode == 2, (process.returncode, stderr[-3000:])
    assert "Traceback" not in stderr, stderr[-3000:]
    assert message(case) in stderr, (message(case), stderr[-3000:])
