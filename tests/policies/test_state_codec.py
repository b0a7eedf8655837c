"""Policy state as versioned JSON: every policy's state survives a round trip between any two rounds
(the same classes, values and types, not only the same encoding), and reading never runs code (an old
pickle is read only through the whitelisting unpickler)."""

from __future__ import annotations

import copyreg
import dataclasses
import io
import json
import os
import pickle
import re
import types
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pytest

from tesserae_slurm.bench.synthetic import synthetic_jobs
from tesserae_slurm.model import Cluster, InputError, JobView
from tesserae_slurm.policies import state_codec
from tesserae_slurm.policies.gavel_rounds import RoundState
from tesserae_slurm.policies.tiresias import QueuedJob, TiresiasState
from tesserae_slurm.policies.base import SchedulingInput
from tesserae_slurm.policies.registry import POLICIES, make_policy
from tesserae_slurm.profiles import DEFAULT_PROFILE, load_profile


class ProfileSpeeds:
    def __init__(self, profile):
        self.profile = profile

    """The A100 profile, and half its speeds on a second GPU type (so Gavel keeps per-type state)."""

    def isolated(self, job, gpu_type):
        return self.profile.best_isolated(job, "a100")[0] * (1.0 if gpu_type == "a100" else 0.5)

    def packed(self, a, b, gpu_type):
        p = self.profile.best_pair(a, b, "a100")
        f = 1.0 if gpu_type == "a100" else 0.5
        return None if p is None else (p.a_speed * f, p.b_speed * f)


OPTIONS = {"tiresias": {"promote_knob": 2.0, "queue_limits": [500.0, 2000.0]}, "gavel": {"packing": True}}


def _inputs(n_rounds=8, n_jobs=24):
    """Rounds with jobs arriving, running on and off and leaving, so queues, deficits and memories move."""
    jobs = synthetic_jobs(n_jobs, np.random.default_rng(3))
    cl, lookup = Cluster.from_spec("2x4:a100,2x4:v100"), ProfileSpeeds(load_profile(DEFAULT_PROFILE))
    executed = {j.id: 0.0 for j in jobs}
    for r in range(n_rounds):
        active = jobs[r: r + 16]
        views = tuple(JobView(j, 0.0, attained_service=executed[j.id] * j.num_gpus, executed_time=executed[j.id],
                              running=(i + r) % 3 == 0, total_work=20000.0, remaining_work=20000.0 - executed[j.id])
                      for i, j in enumerate(active))
        yield SchedulingInput(r * 360.0, 360.0, views, cl, lookup, seed=7)
        for i, j in enumerate(active):
            if (i + r) % 3 == 0:
                executed[j.id] += 360.0 * (1 + i % 4)


def _same(a, b, at="state"):
    """``b`` is ``a`` as a policy reads it: the same classes field by field, tuples as tuples and lists
    as lists, numbers of the same type (1 and 1.0 and True encode alike), mappings with the same items
    in the same order (any Mapping: Tiresias' column store comes back as a read-only dict)."""
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping), f"{at}: a mapping came back as {type(b).__name__}"
        assert list(a) == list(b), f"{at}: keys differ or moved"
        for k in a:
            _same(k, next(x for x in b if x == k), f"{at} key {k!r}")
            _same(a[k], b[k], f"{at}[{k!r}]")
    elif dataclasses.is_dataclass(a):
        assert type(b) is type(a), f"{at}: {type(a).__name__} came back as {type(b).__name__}"
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{at}.{f.name}")
    elif isinstance(a, (tuple, list)):
        assert type(b) is type(a) and len(b) == len(a), f"{at}: {type(a).__name__} came back as {type(b).__name__}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{at}[{i}]")
    else:
        assert type(b) is type(a) and b == a, f"{at}: {a!r} came back as {b!r}"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_state_round_trips_between_any_two_rounds(name):
    policy = make_policy(name, **OPTIONS.get(name, {}))
    state = policy.initial_state()
    inputs = list(_inputs())
    for k, inp in enumerate(inputs):
        ranking, state = policy.rank(inp, state)
        back = state_codec.decode(state_codec.encode(state))
        _same(state, back)
        # the restored state ranks the rest exactly as the live one
        live, restored = state, back
        for later in inputs[k + 1:]:
            r1, live = policy.rank(later, live)
            r2, restored = policy.rank(later, restored)
            assert (r1.order, r1.pairs) == (r2.order, r2.pairs), (name, k)
        _same(live, restored)
    if name in ("tiresias", "gavel", "ftf", "pop", "gavel-ftf", "ftf-lp"):
        assert state is not None and len(state_codec.encode(state)) > 100  # a state that actually holds something


def test_values_that_encode_alike_come_back_as_they_were():
    """What JSON alone would blur: int against float against bool, tuple against list, tuple keys."""
    pair, alone = ("j1", "j2"), ("j1",)
    state = RoundState(gpu_types=("a100", "v100"),
                       allocation=MappingProxyType({alone: (0.5, 1), pair: (1.0, 0)}),
                       job_time=MappingProxyType({alone: (720.0, 0.0)}), worker_time=(2, 2.0),
                       deficits=MappingProxyType({pair: (-0.25, 0.0)}), last_reset=360.0, dirty=True,
                       executed=MappingProxyType({"j1": 720.0, "j2": 0}), scheduled=((pair, 0), (alone, 1)), resets=1)
    _same(state, state_codec.decode(state_codec.encode(state)))
    for blurred in (dataclasses.replace(state, resets=1.0), dataclasses.replace(state, dirty=1),
                    dataclasses.replace(state, scheduled=[[pair, 0], [alone, 1]])):
        with pytest.raises(AssertionError, match="came back as"):  # the comparison tells each apart
            _same(state, blurred)


def test_a_field_this_version_does_not_know_is_ignored_on_reading():
    """A state written by a tesserae whose classes have one more field reads as this version's state
    (a field dropped since, or added later), instead of failing and restarting the policy."""
    policy = make_policy("tiresias", **OPTIONS["tiresias"])
    state = None
    for inp in list(_inputs())[:3]:
        _, state = policy.rank(inp, state if state is not None else policy.initial_state())
    doc = json.loads(state_codec.encode(state))
    doc["state"]["f"]["retired_field"] = {"t": [1, 2]}
    _same(state, state_codec.decode(json.dumps(doc).encode()))


def _legacy_pickle(state) -> bytes:
    """Bytes as tesserae's journal wrote them before the JSON format (its pickler and dispatch table). The
    journal was then the module ``tesserae_slurm.daemon.journal``: old pickles name its function there."""
    import sys

    journal = types.ModuleType("tesserae_slurm.daemon.journal")

    def _mappingproxy(d):
        return types.MappingProxyType(d)
    _mappingproxy.__module__, _mappingproxy.__qualname__ = journal.__name__, "_mappingproxy"
    journal._mappingproxy = _mappingproxy
    sys.modules[journal.__name__] = journal
    try:
        buf = io.BytesIO()
        p = pickle.Pickler(buf)
        p.dispatch_table = {**copyreg.dispatch_table, types.MappingProxyType: lambda m: (_mappingproxy, (dict(m),))}
        p.dump(state)
        return buf.getvalue()
    finally:
        del sys.modules[journal.__name__]


@pytest.mark.parametrize("name", ["tiresias", "gavel", "ftf", "pop"])
def test_a_legacy_pickle_converts_to_the_same_state(name):
    policy = make_policy(name, **OPTIONS.get(name, {}))
    state = policy.initial_state()
    for inp in list(_inputs())[:5]:
        _, state = policy.rank(inp, state)
    if isinstance(state, TiresiasState):  # the old Tiresias kept its queues in a mappingproxy, not in Queues
        state = dataclasses.replace(state, jobs=types.MappingProxyType(dict(state.jobs)))
    old = _legacy_pickle(state)
    with pytest.raises(InputError, match="not JSON"):
        state_codec.decode(old)
    assert state_codec.encode(state_codec.unpickle_legacy(old)) == state_codec.encode(state)


class _Evil:
    def __reduce__(self):
        return os.system, ("true",)


def test_reading_never_runs_code():
    evil = pickle.dumps(_Evil())
    with pytest.raises(pickle.UnpicklingError, match="not part of a tesserae policy state"):
        state_codec.unpickle_legacy(evil)
    with pytest.raises(InputError):
        state_codec.decode(evil)
    with pytest.raises(InputError, match="unknown class"):
        state_codec.decode(b'{"version":1,"state":{"c":"Popen","f":{}}}')
    with pytest.raises(InputError, match="version"):
        state_codec.decode(b'{"version":99,"state":null}')


def test_a_legacy_pickle_of_tiresias_column_store_reads_as_its_jobs():
    """Before the JSON format, Tiresias' queues pickled as ``_Queues(ids, bounds, seqs, service bases,
    executed bases, pending times)``, rows grouped by queue (``bounds``): each row comes back as the
    QueuedJob of its queue."""
    from tesserae_slurm.policies import tiresias

    class _Queues:  # stands in for the old class while pickling: the stream names it, nothing more
        def __init__(self, *columns):
            self.columns = columns

        def __reduce__(self):
            return _Queues, self.columns
    _Queues.__module__, _Queues.__qualname__ = tiresias.__name__, "_Queues"
    tiresias._Queues = _Queues
    try:
        raw = pickle.dumps(TiresiasState(jobs=_Queues(("a", "b", "c", "d"), (0, 1, 1, 4), [5, 6, 7, 8],
                                                      [0.5, 1.5, 2.5, 3.5], [10.0, 11.0, 12.0, 13.0],
                                                      [0.0, 1.0, 2.0, 3.0])))
    finally:
        del tiresias._Queues
    got = state_codec.unpickle_legacy(raw)
    assert dict(got.jobs) == {"a": QueuedJob(0, 5, 0.5, 10.0, 0.0), "b": QueuedJob(2, 6, 1.5, 11.0, 1.0),
                              "c": QueuedJob(2, 7, 2.5, 12.0, 2.0), "d": QueuedJob(2, 8, 3.5, 13.0, 3.0)}
    assert list(got.jobs) == ["a", "b", "c", "d"]


def test_the_stored_form_is_compact_json_and_lists_stay_lists():
    assert state_codec.encode(None) == b'{"version":1,"state":null}'
    value = [1, (2, [3.0]), MappingProxyType({"k": [True]})]
    assert state_codec.encode(value) == b'{"version":1,"state":[1,{"t":[2,[3.0]]},{"m":[["k",[true]]]}]}'
    _same(value, state_codec.decode(state_codec.encode(value)))


@pytest.mark.parametrize("call, message", [
    (lambda: state_codec.encode(object()), "^policy state: cannot store a object$"),
    (lambda: state_codec.encode([{1, 2}]), "^policy state: cannot store a set$"),
    (lambda: state_codec.decode(b'{"version":1,"state":{"x":1}}'),
     r"^policy state: does not fit this tesserae's classes \(policy state: unreadable value \"\{'x': 1\}\"\)$"),
    (lambda: state_codec.decode(b'\x80\x04K\x01.'),
     r"^policy state: not JSON \(a pickled state from before schema 0002\?\)$"),
    (lambda: state_codec.decode(b'{"version":2,"state":null}'), "^policy state: version 2, this tesserae reads 1$"),
    (lambda: state_codec.decode(b'[1]'), "^policy state: version None, this tesserae reads 1$"),
])
def test_what_cannot_be_stored_or_read_is_one_line(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_an_unreadable_value_is_shown_cut_to_40_characters():
    value = {"x": "y" * 100}
    with pytest.raises(InputError, match=re.escape(f"unreadable value {str(value)[:40]!r})")):
        state_codec.decode(json.dumps({"version": 1, "state": value}).encode())
