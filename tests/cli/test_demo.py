"""The commands `aiayn demo` and the README print run as printed after `make demo` (aiayn only in .venv/bin)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from aiayn.cli import COMMANDS, demo

README = Path(__file__).resolve().parents[2] / "README.md"


def test_follow_up_activates_the_environment_when_aiayn_is_not_on_the_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    venv = tmp_path / ".venv"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(demo.shutil, "which", lambda name: None)  # as under `make demo`
    assert demo.follow_up("aiayn translate") == ["source .venv/bin/activate", "aiayn translate"]
    monkeypatch.setattr(demo.shutil, "which", lambda name: f"/usr/local/bin/{name}")  # installed on the PATH
    assert demo.follow_up("aiayn translate") == ["aiayn translate"]


def test_readme_commands_start_with_the_activation_and_name_real_subcommands() -> None:
    """The README's command block first puts .venv/bin on the PATH, then uses only existing subcommands, with
    no `a|b|c` alternatives or `...` placeholders that cannot run as printed."""
    block = README.read_text(encoding="utf-8").split("## Commands", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert lines[0] == "source .venv/bin/activate"
    for line in lines[1:]:
        assert "..." not in line and not re.search(r"\w\|\w", line), line
        for command in re.findall(r"(?:^|\| |&& |-m )aiayn (\w+)", line):
            assert command in COMMANDS, line
