"""docs/errors.md's table of bad inputs is kept true: each row names a case that some test makes
and checks with the row's words (tests/refusals.py)."""
import re

from conftest import ROOT
from refusals import cases


def test_every_row_is_checked_by_a_test():
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py")
                        if p.name != "test_refusals_table.py")
    table = cases()
    assert len(table) >= 10
    unchecked = [case for case in table if not re.search(rf"[\"']{re.escape(case)}[\"']", sources)]
    assert not unchecked, f"rows of docs/errors.md that no test names: {unchecked}"
