"""docs/ stays within its budget: every docs/*.md page at most 20,000 bytes (docs/errors.md, the
table of every refusal, excepted) and docs/ as a whole (every file in it) at most 256,000 bytes.
A page over budget is made shorter (repetition, superseded measurements, long narratives), not
moved into the README."""
import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
PAGE_BUDGET = 20_000
TOTAL_BUDGET = 256_000
EXEMPT = {"errors.md"}
PAGES = sorted(page for page in DOCS.glob("*.md") if page.name not in EXEMPT)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_within_budget(page):
    size = page.stat().st_size
    assert size <= PAGE_BUDGET, (
        f"docs/{page.name} is {size:,} bytes, over the {PAGE_BUDGET:,}-byte page budget")


def test_docs_within_budget():
    sizes = {path.relative_to(ROOT).as_posix(): path.stat().st_size
             for path in DOCS.rglob("*") if path.is_file()}
    total = sum(sizes.values())
    largest = ", ".join(f"{name} {size:,}" for name, size in
                        sorted(sizes.items(), key=lambda item: -item[1])[:5])
    assert total <= TOTAL_BUDGET, (
        f"docs/ is {total:,} bytes in {len(sizes)} files, over its {TOTAL_BUDGET:,}-byte budget; "
        f"the largest: {largest}")
