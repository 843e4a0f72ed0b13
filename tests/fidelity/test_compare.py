"""The comparison of a simulated response with the reference's answer: each outcome, and where they differ."""

import pytest

from simia_web.fidelity.compare import compare, response_value
from simia_web.fidelity.models import Outcome


def outcome(simulated, reference, *, reference_is_error=False):
    return compare(response_value(simulated), response_value(reference), reference_is_error=reference_is_error)


def test_the_same_value_in_another_key_order_and_layout_is_equal():
    assert outcome('{"a": 1, "b": [1, 2]}', '{\n  "b": [1, 2],\n  "a": 1\n}') == (Outcome.EQUAL, "")
    assert outcome("pong", "pong") == (Outcome.EQUAL, "")


@pytest.mark.parametrize(
    ("simulated", "reference"),
    [
        ('{"price": "12.50", "name": "Desk  lamp "}', {"price": 12.5, "name": "Desk lamp"}),  # numbers and spaces
        ('{"item": "{\\"id\\": 3}"}', {"item": {"id": 3}}),  # JSON text inside a string
        ("Caf\u0065\u0301", "Caf\u00e9"),  # Unicode forms
        ('{"id": "W1"}', {"id": "W1", "cancel_reason": None}),  # a null member is no fact
    ],
)
def test_the_same_facts_formatted_differently_are_equivalent(simulated, reference):
    assert outcome(simulated, reference)[0] == Outcome.EQUIVALENT


def test_a_simulated_error_against_a_reported_error_is_equivalent_and_not_otherwise():
    assert outcome('{"error": "no such order"}', "Error: Order not found", reference_is_error=True) == (
        Outcome.EQUIVALENT,
        "both report an error",
    )
    assert outcome('{"error": "no such order"}', "Error: Order not found")[0] == Outcome.DIFFERENT
    assert outcome('{"status": "pending"}', "Error: Order not found", reference_is_error=True)[0] == Outcome.DIFFERENT


def test_differences_are_named_by_pointer():
    result, detail = outcome(
        '{"status": "pending", "items": [1, 2], "extra": true}', {"status": "cancelled", "items": [1], "id": "W1"}
    )
    assert result == Outcome.DIFFERENT
    assert "/status: simulated 'pending', reference 'cancelled'" in detail
    assert "/items: 2 items simulated, 1 in the reference" in detail
    assert "/id: missing from the simulated response" in detail
    assert "/extra: not in the reference's answer" in detail


def test_a_boolean_is_not_the_number_one():
    assert outcome('{"ok": true}', {"ok": 1})[0] == Outcome.DIFFERENT
