"""Every relative link of README.md and docs/*.md leads somewhere: its file exists and its
`#anchor`, if any, is a heading of that file (GitHub's anchors: lowercase, punctuation other than
`-` and `_` dropped, spaces turned into `-`). The README is short and points into docs/, so a
renamed heading or page must not leave a dead link behind."""
import re

import pytest

from conftest import ROOT

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def github_anchor(heading):
    """The anchor GitHub gives a heading: "Dynamic masking (`--input_format`)" ->
    "dynamic-masking---input_format"."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))  # a `# comment` in code is no heading
    return {github_anchor(h) for h in _HEADING.findall(text)}


def relative_links(path):
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return [link for link in _LINK.findall(text) if not re.match(r"[a-z]+:", link)]


def test_github_anchor():
    assert github_anchor("Dynamic masking from text (`--input_format`)") == \
        "dynamic-masking-from-text---input_format"
    assert github_anchor("Table 5 in miniature: `python demo.py --table5`") == \
        "table-5-in-miniature-python-demopy---table5"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_somewhere(page):
    dead = []
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            dead.append(f"{link}: no file {path.relative_to(ROOT)}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            dead.append(f"{link}: no heading with anchor #{anchor} in {path.name}")
    assert not dead, f"{page.relative_to(ROOT)}: dead links:\n" + "\n".join(dead)
