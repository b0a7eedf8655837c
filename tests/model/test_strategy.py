"""Parallelism strategies (``model/strategy.py``): the A100 table's spellings, text -> value -> text,
the spellings the profile treats as one (whitespace, case), and one-line errors for everything else."""

from __future__ import annotations

import csv
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import InputError
from tesserae_slurm.model.strategy import Kind, Strategy, parse_strategy


def shipped_strategies() -> set[str]:
    """Every strategy the A100 table writes, read with the csv module."""
    text = resources.files("tesserae_slurm.data").joinpath("a100_packing_norm_speed.csv").read_text()
    return {r["pipeline_strategy"] for r in csv.DictReader(text.splitlines())} - {"NA"}


def test_every_shipped_strategy_parses_and_is_written_back_the_same():
    shipped = shipped_strategies()
    assert {"10,14", "2,10,10,2", "6,6,6,6", "TP24", "DP24"} <= shipped
    for text in shipped:
        s = parse_strategy(text)
        assert str(s) == text
        assert s.layers == 24


@pytest.mark.parametrize("text,kind,stages", [
    ("10,14", Kind.PIPELINE, (10, 14)),
    ("2,10,10,2", Kind.PIPELINE, (2, 10, 10, 2)),
    ("24", Kind.PIPELINE, (24,)),
    ("TP24", Kind.TENSOR, (24,)),
    ("DP24", Kind.DATA, (24,)),
    ("10, 14", Kind.PIPELINE, (10, 14)),  # the spellings profiles.keys.fold_strategy treats as one
    (" 10 ,14\t", Kind.PIPELINE, (10, 14)),
    ("tp24", Kind.TENSOR, (24,)),
    ("Dp 24", Kind.DATA, (24,)),
    ("010,14", Kind.PIPELINE, (10, 14)),
])
def test_meaning(text, kind, stages):
    s = parse_strategy(text)
    assert (s.kind, s.stages) == (kind, stages)
    assert s.split == (stages if kind is Kind.PIPELINE else None)
    assert s.layers == sum(stages)


@st.composite
def strategy_values(draw) -> Strategy:
    kind = draw(st.sampled_from(Kind))
    if kind is Kind.PIPELINE:
        return Strategy(kind, tuple(draw(st.lists(st.integers(1, 10_000), min_size=1, max_size=16))))
    return Strategy(kind, (draw(st.integers(1, 10_000)),))


@settings(max_examples=300, deadline=None)
@given(strategy_values())
def test_format_then_parse_gives_back_the_strategy(s):
    text = str(s)
    assert parse_strategy(text) == s
    assert str(parse_strategy(text)) == text


@settings(max_examples=200, deadline=None)
@given(strategy_values(), st.data())
def test_whitespace_and_case_do_not_change_the_meaning(s, data):
    text = str(s)
    gaps = data.draw(st.lists(st.sampled_from(["", "", " ", "\t", "  "]), min_size=len(text) + 1,
                              max_size=len(text) + 1))
    upper = data.draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    spelled = "".join(g + (c.upper() if u else c.lower()) for g, c, u in zip(gaps, text, upper)) + gaps[-1]
    assert parse_strategy(spelled) == s


@pytest.mark.parametrize("text", [
    "", " ", ",", "10,", ",14", "10,,14", "10;14", "10.5,13.5", "a,b", "ten,14",  # not a split
    "0,24", "10,0", "-10,34", "TP0", "DP0", "0",  # a stage without layers
    "TP", "DP", "TPx", "TP-24", "TP24,DP24", "PP24", "DP24x",  # TP / DP without a layer count
    "+10,14", "1_0,14", "\u0661\u0660,14",  # int() takes these; a strategy is ASCII digits
])
def test_malformed_text_is_one_line_naming_it(text):
    with pytest.raises(InputError) as err:
        parse_strategy(text)
    assert isinstance(err.value, ValueError)
    message = str(err.value)
    assert repr(text) in message and "\n" not in message


def test_a_value_is_checked_when_made():
    for kind, stages in ((Kind.PIPELINE, ()), (Kind.TENSOR, (12, 12)), (Kind.DATA, ()), (Kind.PIPELINE, (10, 0))):
        with pytest.raises(InputError):
            Strategy(kind, stages)


def test_replicas_of_each_stage():
    assert parse_strategy("TP24").replicas(4) == 1
    assert parse_strategy("DP24").replicas(4) == 4
    assert parse_strategy("10,14").replicas(2) == 1
    assert parse_strategy("12,12").replicas(4) == 2
    assert parse_strategy("24").replicas(2) == 2
    with pytest.raises(InputError, match="3 pipeline stages, which does not divide 4 GPUs"):
        parse_strategy("8,8,8").replicas(4)
    with pytest.raises(InputError, match="positive"):
        parse_strategy("DP24").replicas(0)
