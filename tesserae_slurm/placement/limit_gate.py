"""Per-user and per-account GPU limits: applied by the engine after ranking, so every policy obeys them.

A placed job counts its ``num_gpus`` against its user's and its account's limit, packed or alone (as
Slurm's GrpTRES counts each job's allocation). Jobs without a user (or account) are not limited by
that key. The rule is the consolidation walk with one more check: a job is skipped, reason ``Limit``,
when the jobs placed *before it in policy order* already hold so many GPUs of its user or account
that its own would go over (a policy pair's second member is judged beside its first, where their
unit walks). A job is therefore never held back by jobs that did not get GPUs, and a job held back
is over its limit in the final placement too (usage only grows along the walk).

The walk itself is compiled (consolidate_walk.walk) and knows nothing of limits, so ``place_within``
walks without the jobs it guesses limited and checks the guesses against that walk, until a walk
confirms them (``tests/oracles/limits.py`` is the slow, certain reference). Packing partners are then
added only while their user and account stay within their limits, in policy order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from ..model import Job, PackedPair, PendingJob, PendingReason
from ..model.decision import gpus
from ..model.gpu_limits import GpuLimits
from .consolidate import ConsolidationResult

__all__ = ["LimitGate", "gate"]

Place = Callable[[Sequence[Job], Sequence[tuple[str, str]]], ConsolidationResult]
_GUESSES = 8  # walks of guess-and-check before the slow, certain way


def gate(limits: GpuLimits, jobs: Sequence[Job]) -> LimitGate | None:
    """None when no limit can bind this round (all jobs of each key fit under it together)."""
    if limits.empty:
        return None
    keys = {j.id: k for j in jobs if (k := limits.keys(j))}
    demand: Counter[str] = Counter()
    caps: dict[str, int] = {}
    for j in jobs:
        for key, cap in keys.get(j.id, ()):
            demand[key] += j.num_gpus
            caps[key] = cap
    if all(demand[k] <= caps[k] for k in demand):
        return None
    return LimitGate(keys)


def _walk_order(jobs: Sequence[Job], partner: Mapping[str, str], skipped: set[str]) -> list[str]:
    """Job ids in the order the limits judge them: policy order, a policy pair at its first member's
    place (as the engine's units). The second member stays there when it is skipped itself, since
    there its limit was found to bind; only a skipped first member sends it to its own place."""
    out: list[str] = []
    seen: set[str] = set()
    for j in jobs:
        if j.id in seen:
            continue
        seen.add(j.id)
        out.append(j.id)
        mate = partner.get(j.id)
        if mate is not None and mate not in seen and j.id not in skipped:
            seen.add(mate)
            out.append(mate)
    return out


class LimitGate:
    """One round's limit bookkeeping (built by ``gate``)."""

    def __init__(self, keys: Mapping[str, tuple[tuple[str, int], ...]]) -> None:
        self.keys = keys
        self.used: Counter[str] = Counter()  # GPUs held per key by the jobs placed so far
        self.limited: dict[str, Job] = {}
        # False when the walk is not one with skips: some job skipped for its limit is within it there (a
        # keep-first walk, where a running job's home shapes the jobs ranked ahead, may have no fixpoint)
        self.settled = True

    def _over(self, job: Job, used: Mapping[str, int]) -> bool:
        return any(used.get(k, 0) + job.num_gpus > cap for k, cap in self.keys.get(job.id, ()))

    def _take(self, job: Job) -> None:
        for k, _ in self.keys.get(job.id, ()):
            self.used[k] += job.num_gpus

    def place_within(self, jobs: Sequence[Job], pairs: Sequence[tuple[str, str]], place: Place,
                     homed: Collection[str] = frozenset()) -> tuple[ConsolidationResult, tuple[tuple[str, str], ...]]:
        """The walk in policy order with limited jobs skipped; returns it and the policy pairs kept
        (a pair with a limited member is dropped: the other member is walked alone).

        A job is judged at its place: its own in policy order, except the second member of a policy
        pair whose first member is not limited, judged right after it (their unit walks there, so
        the pair is kept unless that member is over there). It is limited when the GPUs of the placed
        jobs judged before it and its own exceed a cap of its user or account.

        Guess and check: walk without the jobs guessed limited, then judge every job in that order,
        guessed ones included, counting the placed ones. A job over a limit is guessed limited next
        time; a guessed job within its limits is not. When a walk changes no guess, it is the walk
        with skips. Induction along the judging order: the walk places units in order, each by the
        units before it alone, so if the guesses before a job's place are right, the placed jobs
        counted there are those of the walk with skips and the verdict is too; and a second member's
        place follows from its first member's verdict, reached earlier. One case needs more: a
        guessed second member beside a first member that the walk placed alone. The pair may not
        fit where the member alone does (node rules narrow a pair to the nodes both may use), so
        when the first member's GPUs decide, one more walk, with the pair kept, says whether it is
        placed. Usually two or three walks; guesses that keep changing fall back to settling one
        first job per walk. A job of no policy pair over its limit that the walk left out anyway is
        limited without another walk: it holds no GPUs there. Unless it is ``homed``: a running job
        whose home a keep-first walk (moves that pay) reserves until its turn, so that jobs ranked
        ahead of it go around GPUs it will not use (and move running jobs to do so). The walk without
        it is then the answer when it confirms every guess; when it does not (without its home the
        jobs ahead are placed so that it is within its limit again: no walk is a fixpoint), the walk
        with it stands."""
        by_id = {j.id: j for j in jobs}
        partner = {a: b for a, b in pairs} | {b: a for a, b in pairs}
        certain = {j.id for j in jobs if self._over(j, {})}  # over its limit with nothing placed
        guess = set(certain)
        standing: tuple[ConsolidationResult, tuple[tuple[str, str], ...], set[str]] | None = None
        for _ in range(_GUESSES):
            result, kept = self._walk(jobs, pairs, guess, place)
            changed = self._check(jobs, partner, guess, set(result.placed), by_id,
                                  self._paired(jobs, pairs, place, partner, guess))
            if changed is None:
                return self._done(result, kept, guess, by_id)
            left_out = {j for j in changed - guess if j not in result.placed and j not in partner}
            if changed - left_out == guess:  # newly over are only jobs this walk did not place
                if left_out.isdisjoint(homed):
                    return self._done(result, kept, changed, by_id)
                standing = (result, kept, changed)  # unless the walk without their homes confirms it
            elif standing is not None:  # without them, the verdicts changed: no fixpoint
                return self._done(*standing, by_id)
            guess = changed
        if standing is not None:
            return self._done(*standing, by_id)
        guess = set(certain)
        while True:  # the slow, certain way: one first job over its limit settled per walk
            result, kept = self._walk(jobs, pairs, guess, place)
            placed = set(result.placed)
            first = self._first_over(jobs, partner, guess, placed, by_id)
            if first is None:
                left = self._left_over(jobs, partner, guess, placed, by_id)
                if not left.isdisjoint(homed):
                    again, again_kept = self._walk(jobs, pairs, guess | left, place)
                    if self._check(jobs, partner, guess | left, set(again.placed), by_id,
                                   self._paired(jobs, pairs, place, partner, guess | left)) is None:
                        return self._done(again, again_kept, guess | left, by_id)
                if homed:  # a job settled early may be within its limit once later ones were skipped
                    self.settled = self._check(jobs, partner, guess | left, placed, by_id,
                                               self._paired(jobs, pairs, place, partner, guess)) is None
                return self._done(result, kept, guess | left, by_id)
            guess.add(first)

    def _paired(self, jobs: Sequence[Job], pairs: Sequence[tuple[str, str]], place: Place,
                partner: Mapping[str, str], skip: set[str]) -> Callable[[str], bool]:
        """Whether the walk without ``skip``, but with the guessed second member ``b`` kept in its pair,
        places the pair (``_check``'s question)."""
        def paired(second: str) -> bool:
            return partner[second] in self._walk(jobs, pairs, skip - {second}, place)[0].placed
        return paired

    @staticmethod
    def _walk(jobs: Sequence[Job], pairs: Sequence[tuple[str, str]], skip: set[str],
              place: Place) -> tuple[ConsolidationResult, tuple[tuple[str, str], ...]]:
        kept = tuple(p for p in pairs if p[0] not in skip and p[1] not in skip)
        return place([j for j in jobs if j.id not in skip], kept), kept

    def _check(self, jobs: Sequence[Job], partner: Mapping[str, str], guess: set[str], placed: set[str],
               by_id: Mapping[str, Job], paired: Callable[[str], bool]) -> set[str] | None:
        """The next guess, or None when this walk confirms every guess: a job is limited exactly when,
        at its place, the placed jobs before it fill its user or account (placed or not: a limited
        member splits its policy pair). ``paired(b)``: whether the walk with guessed second member
        ``b`` kept in its pair places the pair."""
        used: Counter[str] = Counter()
        out = set(guess)
        before = ""  # the job judged just before: a second member is judged right after its first
        for jid in _walk_order(jobs, partner, guess):
            j = by_id[jid]
            over = self._over(j, used)
            if over and jid in guess and (mate := partner.get(jid)) == before and mate in placed \
                    and mate not in guess:
                # Judged beside its first member, which this walk placed alone: the pair (node rules
                # narrowed to both members' nodes) may not fit where the member alone does.
                without = used.copy()
                without.subtract({k: by_id[mate].num_gpus for k, _ in self.keys.get(mate, ())})
                over = self._over(j, without) or paired(jid)
            if over:
                out.add(jid)
            elif jid in guess:
                out.discard(jid)
            elif jid in placed:
                for k, _ in self.keys.get(jid, ()):
                    used[k] += j.num_gpus
            before = jid
        return None if out == guess else out

    def _first_over(self, jobs: Sequence[Job], partner: Mapping[str, str], skip: set[str], placed: set[str],
                    by_id: Mapping[str, Job]) -> str | None:
        used: Counter[str] = Counter()
        for jid in _walk_order(jobs, partner, skip):
            if jid in skip or (jid not in placed and jid not in partner):  # a lone job left out takes nothing
                continue
            if self._over(by_id[jid], used):
                return jid
            if jid in placed:
                for k, _ in self.keys.get(jid, ()):
                    used[k] += by_id[jid].num_gpus
        return None

    def _left_over(self, jobs: Sequence[Job], partner: Mapping[str, str], skip: set[str], placed: set[str],
                   by_id: Mapping[str, Job]) -> set[str]:
        """Jobs of no policy pair the walk did not place that are over a limit at their place: limited,
        with no walk again (they hold no GPUs in it)."""
        used: Counter[str] = Counter()
        out: set[str] = set()
        for jid in _walk_order(jobs, partner, skip):
            if jid in skip:
                continue
            if jid not in placed and jid not in partner and self._over(by_id[jid], used):
                out.add(jid)
            if jid in placed:
                for k, _ in self.keys.get(jid, ()):
                    used[k] += by_id[jid].num_gpus
        return out

    def _done(self, result: ConsolidationResult, kept: tuple[tuple[str, str], ...], limited: set[str],
              by_id: Mapping[str, Job]) -> tuple[ConsolidationResult, tuple[tuple[str, str], ...]]:
        self.limited.update((jid, by_id[jid]) for jid in limited)
        for jid in result.placed:
            self._take(by_id[jid])
        return result, kept

    def hold_over(self, waiting: Iterable[Job]) -> None:
        """Jobs the walk left waiting that are over a limit already: they wait for it, and never pack."""
        self.limited.update((j.id, j) for j in waiting if self._over(j, self.used))

    def accept_pairs(self, pairs: Sequence[PackedPair], order: Mapping[str, int],
                     by_id: Mapping[str, Job]) -> list[PackedPair]:
        """Packed partners in policy order, each kept while its user and account stay within limits."""
        kept = []
        for p in sorted(pairs, key=lambda p: order[p.partner]):
            j = by_id[p.partner]
            if self._over(j, self.used):
                self.limited[j.id] = j
                continue
            self._take(j)
            kept.append(p)
        return kept

    def pending(self) -> list[PendingJob]:
        """The limited jobs with their reason, counted on the final usage."""
        out = []
        for j in self.limited.values():
            over = [f"{k} holds {self.used.get(k, 0)} of {cap} GPUs" for k, cap in self.keys[j.id]
                    if self.used.get(k, 0) + j.num_gpus > cap]
            out.append(PendingJob(j.id, PendingReason.LIMIT, f"needs {gpus(j.num_gpus)}; " + "; ".join(over)))
        return out
