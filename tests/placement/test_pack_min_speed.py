"""``packing.min_speed`` (beyond the paper): a pair is formed only if each member keeps at least this
normalized speed in it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.test_pack import GPUS, job_lists, profiles
from tesserae_slurm.engine import EngineConfig
from tesserae_slurm.model import InputError, Job
from tesserae_slurm.placement.pack import pack
from tesserae_slurm.profiles import profile_from_json


def _profile():
    """Placed P (alone 1.0). With Q: P 0.9, Q 0.25 (sum 1.15, the best gain). With R: 0.6 + 0.5 = 1.1."""
    return profile_from_json({
        "isolated": [{"model": m, "batch_size": "32", "num_gpus": 1, "speed": 1.0} for m in ("p", "q", "r")],
        "pairs": [{"a": {"model": "p", "batch_size": "32", "num_gpus": 1}, "b": {"model": "q", "batch_size": "32"},
                   "a_speed": 0.9, "b_speed": 0.25},
                  {"a": {"model": "p", "batch_size": "32", "num_gpus": 1}, "b": {"model": "r", "batch_size": "32"},
                   "a_speed": 0.6, "b_speed": 0.5}]})


def test_hand_worked_floor():
    prof = _profile()
    p, q, r = Job("P", 1, "p", "32"), Job("Q", 1, "q", "32"), Job("R", 1, "r", "32")
    gpu = {"P": "a100"}
    (best,) = pack([p], [q, r], prof, gpu).pairs  # no floor: the larger sum, Q slowed to 0.25
    assert (best.partner, best.partner_speed) == ("Q", 0.25)
    (fair,) = pack([p], [q, r], prof, gpu, min_speed=0.3).pairs  # Q below 0.3: R instead
    assert (fair.partner, fair.placed_speed, fair.partner_speed) == ("R", 0.6, 0.5)
    assert pack([p], [q, r], prof, gpu, min_speed=0.5).pairs[0].partner == "R"  # 0.5 >= 0.5: kept
    res = pack([p], [q, r], prof, gpu, min_speed=0.55)  # R at 0.5 too slow now: nobody packs
    assert res.pairs == () and res.unmatched == ("Q", "R")


def test_bad_floor():
    with pytest.raises(InputError, match="min_speed"):
        pack([], [], _profile(), {}, min_speed=1.5)
    with pytest.raises(InputError, match="min_speed"):
        EngineConfig(min_speed=-0.1)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), floor=st.sampled_from([0.0, 0.2, 0.35, 0.5, 0.75, 1.0]))
def test_no_member_below_the_floor_and_nothing_lost_above_it(data, floor):
    """Every pair keeps both members at >= min_speed; and every pair packed without a floor whose
    members are all above it is still an option: the floor only ever removes edges, so with no
    floor-breaking pair in the unfloored result the result is the same."""
    profile = data.draw(profiles())
    placed, pending = data.draw(job_lists("p")), data.draw(job_lists("q"))
    gpu_of = {j.id: data.draw(st.sampled_from(GPUS)) for j in placed}
    floored = pack(placed, pending, profile, gpu_of, min_speed=floor)
    for pair in floored.pairs:
        assert pair.placed_speed >= floor and pair.partner_speed >= floor
    free = pack(placed, pending, profile, gpu_of)
    if all(min(p.placed_speed, p.partner_speed) >= floor for p in free.pairs):
        gain = sum(p.weight for p in floored.pairs) - sum(p.weight for p in free.pairs)
        assert len(floored.pairs) == len(free.pairs) and gain == pytest.approx(0.0, abs=1e-9)
