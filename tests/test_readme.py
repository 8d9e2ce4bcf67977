"""The README's quick start works: every command line in its ```bash blocks (between the markers
`<!-- quickstart:begin -->` and `<!-- quickstart:end -->`) runs and exits 0.

Short settings: `DEMO_QUICK=1` (demo.py runs its `--quick` stages). `pip install` lines are
skipped (CI installed the requirements already), and so is `python -m pytest ...`: it is the
command that runs this test (CI runs exactly the README's). The commands run in a temporary
folder that mirrors the repository's top level through symlinks, so that what they write
(`./demo_output`) stays out of the checkout. The demo command runs once per session
(`conftest.quick_demo`); tests/test_demo.py checks its outputs.
"""
import re

import pytest

from conftest import QUICK_DEMO_GROUP, README_DEMO_COMMAND, ROOT, run_quickstart_command

README = ROOT / "README.md"
BEGIN, END = "<!-- quickstart:begin -->", "<!-- quickstart:end -->"
_BASH_BLOCK = re.compile(r"^```(?:bash|shell|sh)[ \t]*\n(.*?)^```", re.M | re.S)
_PIP_INSTALL = re.compile(r"\bpip3?\s+install\b")
_PYTEST = re.compile(r"^(\s*python3?\s+-m\s+pytest)\b")


def quickstart_commands(text):
    """The command lines of the ```bash blocks between the quick-start markers, in order.

    Backslash continuations are joined; blank lines and `#` comments are dropped.
    Raises ValueError if the markers are missing or enclose no command.
    """
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"expected one {BEGIN} ... {END} section")
    section = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    commands = []
    for block in _BASH_BLOCK.findall(section):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.append(line)
    if not commands:
        raise ValueError(f"no command in a ```bash block between {BEGIN} and {END}")
    return commands


def short_form(command):
    """The command as the test runs it; None for commands it skips (pip install, pytest)."""
    if _PIP_INSTALL.search(command) or _PYTEST.search(command):
        return None
    return command


class MissingQuickstart(str):
    """Stands for the commands when README.md has none: the test case fails with this text."""


def _readme_commands():
    try:
        return quickstart_commands(README.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        # One failing case that says what is wrong, instead of silently testing nothing.
        message = f"{README}: {e}; the quick start is the block between the quickstart markers in README.md"
        return [pytest.param(MissingQuickstart(message), id="missing-quickstart")]


def test_quickstart_commands_parsing():
    text = (f"intro\n{BEGIN}\nInstall:\n```bash\npython -m pip install -r requirements.txt\n```\n"
            f"```bash\n# the demo\npython demo.py \\\n  --quick\n\npython -m pytest -q tests\n```\n"
            f"{END}\n```bash\nnot this\n```\n")
    commands = quickstart_commands(text)
    assert commands == ["python -m pip install -r requirements.txt", "python demo.py    --quick",
                        "python -m pytest -q tests"]
    assert [short_form(c) for c in commands] == [None, "python demo.py    --quick", None]
    with pytest.raises(ValueError, match="quickstart:begin"):
        quickstart_commands("no markers")


@pytest.mark.large
@pytest.mark.xdist_group(QUICK_DEMO_GROUP)  # shares conftest.quick_demo
@pytest.mark.parametrize("command", _readme_commands())
def test_quickstart_command_runs(command, request):
    if isinstance(command, MissingQuickstart):
        pytest.fail(command)
    command = short_form(command)
    if command is None:
        pytest.skip("pip install: the requirements are installed already; pytest: running")
    if command == README_DEMO_COMMAND:
        result, _ = request.getfixturevalue("quick_demo")  # shared with test_demo.py
    else:
        result = run_quickstart_command(command, request.getfixturevalue("readme_mirror"))
    assert result.returncode == 0, (
        f"README quick start command failed: {command}\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-3000:]}")
