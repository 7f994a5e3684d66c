"""Passive outlier detection for one backend: eject after failures, then let one probe decide.

    detector = OutlierDetector(settings.resilience.ejection)
    admission = detector.admit(force=False)                           # before a call
    detector.record(ok, admission.probe, admission.forced_in)         # after it

States: *closed* (calls flow), *ejected* (calls are refused until `ejected_until`), *half-open*
(the first call after the ejection is the probe; others are refused until it returns). A backend
is ejected after `consecutive_failures` failures in a row, or when at least `min_requests` calls in
the last `window_s` seconds failed at `failure_rate` or more. Each ejection lasts
``base_ejection_s * 2 ** (ejections - 1)``, capped at `max_ejection_s`; the count of ejections
decays after a healthy period as long as the longest ejection. `force` admits a call regardless:
the router uses it when every candidate is ejected and the least bad one must still be tried; a
forced call that succeeds ends the ejection, since the backend has just shown it answers.

Failures eject the backend for everyone only when they are not one caller's alone: a caller's own
requests (a call it made slow with its arguments, a flood of them) can make the backend fail for that
caller without it failing for anyone else. So the failures that eject (and the failed probe that ejects
again) must come from two callers or more, from callers the router cannot tell apart (`caller` None: no
authentication, or a trusted caller naming none), or from the only caller that asked for the backend
within `window_s` (then nobody else is there to protect, and a deployment with one key behaves as one
without keys). Such an ejection rests on that caller's word alone, so it lasts only until another caller
comes: that caller's first call is the probe at once (`ejected_by`: the router still sends to the
backend), and the rest of the ejection is the first caller's own. Otherwise the named caller whose own
`consecutive_failures` failures in a row would have ejected the backend is refused it for
`base_ejection_s`, its failures no longer count towards ejecting it for the others, and everyone else is
still served.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from router.settings import EjectionSettings

_MAX_CALLERS = 10_000  # named callers whose own failures are counted (the least recent are forgotten)


class Admission(NamedTuple):
    allowed: bool
    probe: bool
    forced_in: int | None = None  # the ejection (`epoch`) during which only `force` let the call in


class OutlierDetector:
    def __init__(self, settings: EjectionSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self.state = "closed"
        self.consecutive_failures = 0
        self.ejections = 0
        self.epoch = 0  # counts every ejection (unlike `ejections`, never decays)
        self.on_eject: Callable[[], None] | None = None  # told of each ejection (the host's metric)
        self.ejected_until: float | None = None
        self.last_failures = 0  # the failures that caused the latest ejection (for its message)
        self._probe_in_flight = False
        self._window: deque[tuple[float, bool, str | None]] = deque()
        self._run: list[str | None] = []  # whose the failures of the current run are (since a success or ejection)
        self._own: dict[str, tuple[int, float]] = {}  # a caller's own failures in a row, and its ejection's end
        self._seen: dict[str | None, float] = {}  # when each caller last asked for the backend
        self._ejected_by: str | None = None  # the named caller whose failures alone made the current ejection
        self._healthy_since = clock()

    @property
    def ejected(self) -> bool:
        return self.state == "ejected" and self.ejected_until is not None and self._clock() < self.ejected_until

    @property
    def ejected_by(self) -> str | None:
        """The named caller whose failures alone made the current ejection: any other caller's call still
        goes (as the probe)."""
        return self._ejected_by if self.ejected else None

    def admit(self, force: bool = False, caller: str | None = None) -> Admission:
        """Whether a call about to be made (for `caller`) may go, and whether it is the probe."""
        now = self._clock()
        self._seen.pop(caller, None)
        self._seen[caller] = now  # newest last: the least recent go first past the bound
        if len(self._seen) > _MAX_CALLERS:
            del self._seen[next(iter(self._seen))]
        if caller is not None and not force and self._own.get(caller, (0, 0.0))[1] > now:
            return Admission(False, False)
        if self.state == "ejected" and self.ejected_until is not None and now >= self.ejected_until:
            self.state = "half_open"
            self._probe_in_flight = False
        elif self.ejected and self._ejected_by is not None and self._ejected_by != caller and not force:
            # Another caller came: the failures that ejected the backend were not its; what is left of the
            # ejection is theirs who failed, and this call probes.
            self._own[self._ejected_by] = (0, self.ejected_until or now)
            self.state = "half_open"
            self._probe_in_flight = False
        if self.state == "closed":
            return Admission(True, False)
        if self.state == "half_open" and not self._probe_in_flight:
            self._probe_in_flight = True
            return Admission(True, True)
        return Admission(True, False, self.epoch) if force else Admission(False, False)

    def ejected_for(self, caller: str | None) -> float:
        """Seconds left of the caller's own ejection (0: none)."""
        if caller is None or caller not in self._own:
            return 0.0
        return max(0.0, self._own[caller][1] - self._clock())

    def record(self, ok: bool, probe: bool = False, forced_in: int | None = None, caller: str | None = None) -> bool:
        """Count an outcome of `caller`'s call; True when this outcome ejected the backend for everyone.
        `forced_in` is the admission's: a forced success ends only the ejection it was admitted in, not a
        later one, and a call already in flight when the backend was ejected ends none."""
        now = self._clock()
        self._window.append((now, ok, caller))
        cutoff = now - self.settings.window_s
        while self._window and self._window[0][0] < cutoff:
            self._window.popleft()
        if ok:
            if caller in self._own and self._own[caller][1] <= now:  # its run of failures ends
                del self._own[caller]
            self.consecutive_failures = 0
            self._run.clear()
            if (self.state == "half_open" and (probe or not self._probe_in_flight)) or (
                    forced_in == self.epoch and self.state == "ejected"):
                self._close(now)
            if self.state == "closed" and now - self._healthy_since > self.settings.max_ejection_s:
                self.ejections = 0
            return False
        self.consecutive_failures += 1
        self._run.append(caller)
        if self.state == "half_open" and (probe or not self._probe_in_flight):
            if self._everyones(set(self._run), now):
                self._eject(now, set(self._run))
                return True
            self._probe_in_flight = False  # it said nothing for the others: the next call probes
        elif self.state == "closed" and (callers := self._ejecting(now)):
            self._eject(now, callers)
            return True
        if caller is not None:
            self._count_own(caller, now)
        return False

    def abandon(self, probe: bool) -> None:
        """A call that says nothing of the backend (cancelled: it lost a parallel or hedged race; cut short
        by the caller's own deadline) counts for nothing, and if it was the half-open probe the next call
        probes instead."""
        if probe and self.state == "half_open":
            self._probe_in_flight = False

    def _ejecting(self, now: float) -> set[str | None]:
        """The callers whose failures eject the backend for everyone now (none: it stays)."""
        s = self.settings
        if self.consecutive_failures >= s.consecutive_failures and self._everyones(set(self._run), now):
            return set(self._run)
        if len(self._window) >= s.min_requests:
            failed = {caller for _, ok, caller in self._window if not ok}
            if sum(not ok for _, ok, _ in self._window) / len(self._window) >= s.failure_rate and \
                    self._everyones(failed, now):
                return failed
        return set()

    def _everyones(self, callers: set[str | None], now: float) -> bool:
        """Whether failures of these callers speak for everyone: not one named caller's alone, or that caller
        is the only one that asked for the backend lately."""
        if len(callers) != 1 or None in callers:
            return bool(callers)
        (one,) = callers
        cutoff = now - self.settings.window_s
        return not any(when >= cutoff for other, when in self._seen.items() if other != one)

    def _count_own(self, caller: str, now: float) -> None:
        """A named caller's own run of failures; at the threshold the backend is refused to it alone, and its
        failures stop counting towards ejecting it for the others."""
        failures, until = self._own.pop(caller, (0, 0.0))
        failures += 1
        if failures >= self.settings.consecutive_failures:
            failures, until = 0, now + self.settings.base_ejection_s
            self._run = [c for c in self._run if c != caller]
            self.consecutive_failures = len(self._run)
            self._window = deque(e for e in self._window if e[1] or e[2] != caller)
        self._own[caller] = (failures, until)  # newest last: the least recent go first past the bound
        if len(self._own) > _MAX_CALLERS:
            del self._own[next(iter(self._own))]

    def _eject(self, now: float, callers: set[str | None]) -> None:
        self.last_failures = max(self.consecutive_failures, sum(1 for _, ok, _ in self._window if not ok))
        self.ejections += 1
        self.epoch += 1
        if self.on_eject is not None:
            self.on_eject()
        # the exponent capped: a backend failing its probes for days would otherwise overflow the float
        duration = min(self.settings.base_ejection_s * 2 ** min(self.ejections - 1, 60), self.settings.max_ejection_s)
        self.state = "ejected"
        self.ejected_until = now + duration
        self._ejected_by = next(iter(callers)) if len(callers) == 1 else None
        self._probe_in_flight = False
        self._window.clear()
        self._run.clear()  # the probe's failure, and those after it, are weighed on their own

    def _close(self, now: float) -> None:
        self.state = "closed"
        self.ejected_until = None
        self._probe_in_flight = False
        self.consecutive_failures = 0
        self._run.clear()
        self._healthy_since = now

    def remaining_s(self) -> float:
        if self.ejected_until is None:
            return 0.0
        return max(0.0, self.ejected_until - self._clock())
