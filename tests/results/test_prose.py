"""The prose template of docs/results.md: how its wrapped lines become the document's, and that the
renderer uses every block it holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tesserae_slurm.results import prose

PACKAGE = Path(prose.__file__).parent


def test_wrapped_lines_join_and_the_rest_keeps_its_lines(tmp_path, monkeypatch):
    (tmp_path / "prose.md").write_text("\n".join([
        "<!-- a head comment that names no block -->", "ignored", "<!-- one -->", "A paragraph {x}", "wrapped",
        "  twice.", "", "<!-- many -->", "Intro:", "", "* item one", "  continued", "* item two", "| a | b |",
        "```sh", "keep   this", "  as is", "```", "after", "the fence", "", ""]))
    monkeypatch.setattr(prose, "_FILE", tmp_path / "prose.md")
    prose._blocks.cache_clear()
    try:
        assert prose.text("one", x="here") == "A paragraph here wrapped twice."
        assert prose.lines("many") == ["Intro:", "", "* item one continued", "* item two", "| a | b |", "```sh",
                                       "keep   this", "  as is", "```", "after the fence"]
        with pytest.raises(ValueError, match="has 10 lines"):
            prose.text("many")
    finally:
        prose._blocks.cache_clear()


def test_every_block_is_used_and_every_use_has_a_block():
    names = set(prose._blocks())
    source = "\n".join(p.read_text() for p in PACKAGE.glob("*.py"))
    used = set(re.findall(r"prose\.(?:text|lines)\(\s*\"([a-z0-9-]+)\"", source))
    assert used == names
