"""Production's faults, injected mid-job into a cluster of the suite's own (tests/faults/cluster.py):
each job ends with every unit done exactly once and every LLM call recorded once, with no command run
by hand. The time each took to heal is printed."""

from collections import Counter

import pytest

from . import scenarios

pytestmark = pytest.mark.integration


def _report(capsys, name: str, figures: dict) -> None:
    with capsys.disabled():
        print(f"\n[faults] {name}: {scenarios.figures_line(figures)}")


def _every_unit_done_once(run, *, cut_short=frozenset()) -> None:
    units = run.units()
    assert run.job_status() == "succeeded"
    assert [(u["status"], u["error"]) for u in units] == [("done", "")] * len(units)
    assert run.trajectories_per_unit() == Counter({u["id"]: 1 for u in units})
    # An outage never spent an attempt, and no unit ran twice at once; a unit a killed worker was running
    # had a second attempt.
    assert all(u["attempts"] == 1 or (u["id"] in cut_short and u["attempts"] == 2) for u in units), units


def test_broker_killed_without_persistence_heals_on_its_own(fault_run, capsys):
    run = fault_run()
    figures = scenarios.broker_restart(run)
    _report(capsys, "broker restart", figures)
    _every_unit_done_once(run)
    assert figures["sent_again"] > 0  # messages were lost, and the watchdog sent them again
    served = sum(run.served_requests(), Counter())
    assert run.recorded_requests() == served  # every request the servers answered has its row, once


def test_database_restarted_mid_job_heals_on_its_own(fault_run, capsys):
    run = fault_run()
    figures = scenarios.database_restart(run)
    _report(capsys, "database restart", {k: v for k, v in figures.items() if k not in ("web_during", "web_after")})
    _every_unit_done_once(run)
    assert run.recorded_requests() == sum(run.served_requests(), Counter())
    # Pages and REST: 503 with a retry hint, never 500, until the pool has connected again (within seconds).
    assert set(figures["web_during"]) == {(503, "5")}
    assert set(figures["web_after"]) == {(200, None)}  # every web process replaced its dead connections


def test_worker_killed_mid_job_heals_without_a_restart(fault_run, capsys):
    run = fault_run()
    figures = scenarios.worker_kill(run)
    recorded, served = run.recorded_requests(), run.served_requests()
    unrecorded = sum(served, Counter()) - recorded
    _report(capsys, "worker killed", {**figures, "requests_unrecorded": unrecorded.total()})
    assert figures["held_by_the_killed_worker"] > 0
    _every_unit_done_once(run, cut_short=run.killed_worker_units)
    assert recorded <= sum(served, Counter())  # no row without its request, none twice
    # Requests not recorded are those of the units the kill cut short: the killed worker's, held in its memory
    # until each unit's end (one INSERT per unit, not one per call).
    assert unrecorded <= served[0]
