from __future__ import annotations

import pytest

from router.resilience.outlier import OutlierDetector
from router.settings import EjectionSettings
from tests.unit.helpers import FakeClock


def detector(**overrides: float) -> tuple[OutlierDetector, FakeClock]:
    values = {
        "consecutive_failures": 3,
        "failure_rate": 0.5,
        "window_s": 30.0,
        "min_requests": 100,
        "base_ejection_s": 5.0,
        "max_ejection_s": 20.0,
    }
    values.update(overrides)
    clock = FakeClock(1000.0)
    return OutlierDetector(EjectionSettings(**values), clock=clock), clock


def test_a_new_detector_admits_calls() -> None:
    d, _ = detector()
    assert d.admit()[:2] == (True, False)
    assert d.state == "closed" and not d.ejected and d.remaining_s() == 0.0


def test_ejection_after_n_consecutive_failures() -> None:
    d, clock = detector(consecutive_failures=3)
    assert d.record(False) is False
    assert d.record(False) is False
    assert d.admit()[:2] == (True, False)
    assert d.record(False) is True
    assert d.state == "ejected" and d.ejected
    assert d.ejected_until == clock.now + 5.0
    assert d.admit()[:2] == (False, False)


def test_a_success_resets_the_consecutive_failure_count() -> None:
    d, _ = detector(consecutive_failures=3)
    d.record(False)
    d.record(False)
    d.record(True)
    assert d.consecutive_failures == 0
    assert d.record(False) is False
    assert d.record(False) is False
    assert d.state == "closed"


def test_ejection_when_the_failure_rate_in_the_window_is_too_high() -> None:
    d, _ = detector(consecutive_failures=100, min_requests=4, failure_rate=0.5)
    assert d.record(True) is False
    assert d.record(False) is False
    assert d.record(True) is False
    assert d.state == "closed"
    assert d.record(False) is True  # 2 of 4 failed
    assert d.state == "ejected"


def test_failure_rate_needs_min_requests() -> None:
    d, _ = detector(consecutive_failures=100, min_requests=4, failure_rate=0.5)
    d.record(False)
    d.record(True)
    assert d.record(False) is False  # 2 of 3, but only 3 requests
    assert d.state == "closed"


def test_failures_older_than_the_window_do_not_count() -> None:
    d, clock = detector(consecutive_failures=100, min_requests=4, failure_rate=0.5, window_s=30.0)
    d.record(False)
    d.record(False)
    clock.advance(31)
    d.record(True)
    d.record(True)
    d.record(True)
    assert d.record(False) is False  # the window now holds 3 successes and 1 failure
    assert d.state == "closed"


def test_half_open_admits_exactly_one_probe() -> None:
    d, clock = detector()
    for _ in range(3):
        d.record(False)
    clock.advance(5.0)
    assert d.admit()[:2] == (True, True)
    assert d.state == "half_open"
    assert d.admit()[:2] == (False, False)
    assert d.admit()[:2] == (False, False)


def test_a_successful_probe_closes_the_detector() -> None:
    d, clock = detector()
    for _ in range(3):
        d.record(False)
    clock.advance(5.0)
    probe = d.admit().probe
    assert d.record(True, probe=probe) is False
    assert d.state == "closed"
    assert d.ejected_until is None
    assert d.admit()[:2] == (True, False)
    assert d.admit()[:2] == (True, False)


def test_a_failed_probe_re_ejects_for_longer() -> None:
    d, clock = detector(base_ejection_s=5.0, max_ejection_s=100.0)
    for _ in range(3):
        d.record(False)
    assert d.remaining_s() == 5.0
    clock.advance(5.0)
    probe = d.admit().probe
    assert d.record(False, probe=probe) is True
    assert d.state == "ejected"
    assert d.remaining_s() == 10.0
    assert d.ejections == 2


def test_a_late_non_probe_failure_does_not_re_eject_while_the_probe_is_out() -> None:
    d, clock = detector()
    for _ in range(3):
        d.record(False)
    clock.advance(5.0)
    assert d.admit()[:2] == (True, True)
    assert d.record(False, probe=False) is False  # a call admitted before the ejection, finishing late
    assert d.state == "half_open"


def test_ejection_time_doubles_and_is_capped() -> None:
    d, clock = detector(base_ejection_s=5.0, max_ejection_s=20.0)
    for _ in range(3):
        d.record(False)
    durations = [d.remaining_s()]
    for _ in range(3):
        clock.advance(d.remaining_s())
        probe = d.admit().probe
        assert probe
        d.record(False, probe=True)
        durations.append(d.remaining_s())
    assert durations == [5.0, 10.0, 20.0, 20.0]


def test_the_ejection_count_decays_after_a_long_healthy_period() -> None:
    d, clock = detector(base_ejection_s=5.0, max_ejection_s=20.0)
    for _ in range(3):
        d.record(False)
    clock.advance(5.0)
    probe = d.admit().probe
    d.record(True, probe=probe)
    assert d.ejections == 1
    clock.advance(21.0)
    d.record(True)
    assert d.ejections == 0
    for _ in range(3):
        d.record(False)
    assert d.remaining_s() == 5.0  # back to the base duration


def test_force_admits_while_ejected_without_taking_the_probe() -> None:
    d, clock = detector()
    for _ in range(3):
        d.record(False)
    assert d.admit(force=True)[:2] == (True, False)
    assert d.admit()[:2] == (False, False)
    clock.advance(5.0)
    assert d.admit()[:2] == (True, True)  # the probe is still available after forced calls
    assert d.admit(force=True)[:2] == (True, False)


def test_a_forced_call_that_succeeds_ends_the_ejection_but_a_late_success_does_not() -> None:
    d, _ = detector()
    for _ in range(3):
        d.record(False)
    d.record(True)  # a call that was already in flight when the backend was ejected
    assert d.ejected
    failed = d.admit(force=True)
    assert failed.allowed and not failed.probe and failed.forced_in == d.epoch
    d.record(False, forced_in=failed.forced_in)
    assert d.ejected
    d.record(True, forced_in=d.admit(force=True).forced_in)
    assert d.state == "closed" and not d.ejected and d.admit()[:2] == (True, False)


def test_a_forced_success_does_not_end_a_later_ejection() -> None:
    d, clock = detector()
    for _ in range(3):
        d.record(False)
    slow = d.admit(force=True)  # forced into the first ejection, answers only after the second began
    clock.advance(5.0)
    d.record(True, probe=d.admit().probe)  # the probe closes the first ejection
    for _ in range(3):
        d.record(False)
    assert d.ejected
    d.record(True, forced_in=slow.forced_in)
    assert d.ejected


def test_remaining_counts_down_with_the_clock() -> None:
    d, clock = detector()
    for _ in range(3):
        d.record(False)
    clock.advance(2.0)
    assert d.remaining_s() == pytest.approx(3.0)
    clock.advance(10.0)
    assert d.remaining_s() == 0.0
    assert not d.ejected


def test_a_cancelled_probe_lets_the_next_call_probe_instead() -> None:
    from router.resilience.outlier import OutlierDetector
    from router.settings import EjectionSettings

    now = [0.0]
    d = OutlierDetector(EjectionSettings(consecutive_failures=1, base_ejection_s=1.0), clock=lambda: now[0])
    d.record(False)
    now[0] = 2.0
    assert d.admit()[:2] == (True, True)
    assert d.admit()[:2] == (False, False)  # one probe at a time
    d.abandon(probe=True)  # the probe lost a race and was cancelled
    assert d.admit()[:2] == (True, True)


# -- whose failures eject a backend for everyone ---------------------------------------------------


def call(d: OutlierDetector, caller: str | None, ok: bool) -> tuple[bool, bool]:
    """One call of `caller` as a backend actor makes it: admitted (or refused), then recorded."""
    admission = d.admit(caller=caller)
    if not admission.allowed:
        return False, False
    return True, d.record(ok, admission.probe, admission.forced_in, caller)


def test_the_only_callers_failures_eject_for_everyone_with_doubling_and_a_probe() -> None:
    """A deployment with one key: its failures are everyone's, as without keys."""
    d, clock = detector(consecutive_failures=3)
    for _ in range(3):
        call(d, "svc", False)
    assert d.state == "ejected" and d.remaining_s() == 5.0
    clock.advance(5.0)
    assert call(d, "svc", False) == (True, True)  # its failed probe ejects again, for twice as long
    assert d.remaining_s() == 10.0


def test_one_callers_failures_refuse_it_alone_while_another_is_served() -> None:
    d, clock = detector(consecutive_failures=3)
    assert call(d, "alice", True) == (True, False)
    for _ in range(3):
        call(d, "mallory", False)
    assert d.state == "closed" and d.ejected_for("mallory") == 5.0
    assert call(d, "mallory", True) == (False, False)  # refused
    assert call(d, "alice", True) == (True, False)
    # Mallory's failures no longer count: one failure of Alice's is no run of two callers.
    assert call(d, "alice", False) == (True, False) and d.state == "closed"
    clock.advance(5.0)
    assert call(d, "mallory", True) == (True, False)  # served again once its own ejection ends


def test_failures_of_two_callers_or_of_callers_it_cannot_tell_apart_eject_for_everyone() -> None:
    d, _ = detector(consecutive_failures=3)
    call(d, "alice", True)
    call(d, "bob", False)
    call(d, "alice", False)
    assert call(d, "bob", False) == (True, True) and d.state == "ejected"
    anonymous, _ = detector(consecutive_failures=3)
    call(anonymous, "alice", True)
    for _ in range(3):
        call(anonymous, None, False)
    assert anonymous.state == "ejected"


def test_a_probe_failed_by_one_caller_ejects_again_only_when_it_speaks_for_the_others() -> None:
    d, clock = detector(consecutive_failures=2)
    call(d, "alice", False)
    call(d, "bob", False)
    assert d.state == "ejected"
    clock.advance(5.0)
    assert call(d, "alice", True) == (True, False)  # probes, and closes
    call(d, "alice", False)
    call(d, "bob", False)
    clock.advance(10.0)  # the second ejection's length
    assert call(d, "mallory", False) == (True, False)  # its probe fails: Alice and Bob asked lately
    assert d.state == "half_open"
    assert call(d, "alice", False) == (True, True)  # the next probe fails too: two callers, everyone's
    assert d.remaining_s() == 20.0


def test_the_failure_rate_of_the_only_caller_ejects_for_everyone() -> None:
    d, _ = detector(consecutive_failures=100, min_requests=10)
    for i in range(10):
        call(d, "svc", i % 2 == 0)
    assert d.state == "ejected"


def test_an_ejection_on_the_only_callers_failures_lasts_until_another_caller_comes() -> None:
    d, clock = detector(consecutive_failures=3)
    for _ in range(3):
        call(d, "mallory", False)
    assert d.state == "ejected" and d.ejected_by == "mallory" and d.remaining_s() == 5.0
    clock.advance(1.0)
    # Alice has seen no failure: her first call probes at once, and its success closes the backend.
    assert d.admit(caller="alice")[:2] == (True, True)
    assert d.admit(caller="bob")[:2] == (False, False)  # one probe at a time
    assert d.record(True, probe=True, caller="alice") is False and d.state == "closed"
    # The rest of the ejection is Mallory's own.
    assert call(d, "mallory", True) == (False, False) and d.ejected_for("mallory") == 4.0
    assert call(d, "bob", True) == (True, False)
    clock.advance(4.0)
    assert call(d, "mallory", True) == (True, False)


def test_a_newcomers_failed_probe_leaves_the_backend_to_the_next_probe_and_two_callers_eject_it() -> None:
    d, _ = detector(consecutive_failures=3)
    for _ in range(3):
        call(d, "mallory", False)
    assert call(d, "alice", False) == (True, False)  # her probe failed: one more caller's word
    assert d.state == "half_open" and d.ejected_by is None
    assert call(d, "bob", False) == (True, True)  # two callers besides Mallory: everyone's
    assert d.state == "ejected" and d.ejected_by is None and d.remaining_s() == 10.0
    assert call(d, "carol", True) == (False, False)


def test_failures_of_callers_it_cannot_tell_apart_are_not_one_callers() -> None:
    d, _ = detector(consecutive_failures=3)
    for _ in range(3):
        call(d, None, False)
    assert d.state == "ejected" and d.ejected_by is None
    assert call(d, "alice", True) == (False, False)


def test_a_backend_failing_its_probes_for_days_stays_ejected_for_the_longest_time() -> None:
    d, clock = detector(base_ejection_s=5.0, max_ejection_s=300.0)
    for _ in range(3):
        d.record(False)
    for _ in range(1100):  # three and a half days of failed probes at the longest ejection
        clock.advance(d.remaining_s())
        assert d.record(False, probe=d.admit().probe) is True
    assert d.remaining_s() == 300.0 and d.ejections == 1101
