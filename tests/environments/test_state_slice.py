"""The simulator's prompt holds the slice of the world state a call names, and always fits its budget."""

import json

import jsonpatch
import pytest

from simia_web.llm.client import LLMClient
from simia_web.llm.models import EndpointProfile
from simia_web.simulation.simulator import simulator_messages
from simia_web.simulation.state_slice import state_view
from tests.conftest import SHARED_DATA

RETAIL = SHARED_DATA / "tau2" / "retail"
# What the default profile (max_tokens 2048) leaves for a simulator prompt in an 8k context.
BUDGET = LLMClient(EndpointProfile(max_tokens=2048, context_window=8192), stage="simulator").prompt_chars_available()


def prompt_chars(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages)


def big_state(records: int = 5000) -> dict:
    """About 1 MB: users keyed by id, each with orders; an orders list addressed by index."""
    users = {
        f"user_{i:05d}": {
            "user_id": f"user_{i:05d}",
            "name": {"first_name": f"First{i}", "last_name": f"Last{i % 977}"},
            "zip": f"{10000 + i % 500}",
            "country": "USA",
            "orders": [f"#W{i:07d}"],
        }
        for i in range(records)
    }
    orders = [{"order_id": f"#W{i:07d}", "user_id": f"user_{i:05d}", "status": "pending"} for i in range(records)]
    return {"users": users, "orders": orders}


def test_a_small_state_is_shown_whole():
    state = {"orders": {"W1": {"status": "pending"}}}
    assert state_view(state, {"order_id": "W1"}, BUDGET) == ({"state": state}, [])


def test_a_1_mb_state_is_sliced_to_the_records_named_and_patches_apply_to_the_full_state():
    state = big_state()
    assert len(json.dumps(state)) > 1_000_000
    messages, cut = simulator_messages(
        api={"name": "cancel_order", "description": "Cancel a pending order."},
        arguments={"order_id": "#W0001234", "reason": "no longer needed"},
        task="Cancel my order.",
        state=state,
        history=[{"role": "user", "content": "Cancel my order #W0001234 please."}],
        budget=BUDGET,
    )
    assert prompt_chars(messages) <= BUDGET
    view = json.loads(messages[1]["content"])["state_slice"]
    # The order is found by value inside a list: its pointer is its index in the full state.
    assert view["records"]["/orders/1234"]["order_id"] == "#W0001234"
    assert view["collections"]["/orders"].startswith("array of 5000 items")
    patched = jsonpatch.apply_patch(state, [{"op": "replace", "path": "/orders/1234/status", "value": "cancelled"}])
    assert patched["orders"][1234]["status"] == "cancelled"
    # The user record names the order too (in its orders list) and comes with it.
    assert "/users/user_01234" in view["records"]
    assert json.loads(messages[1]["content"]).get("cut", []) == cut


def test_records_naming_more_of_the_arguments_come_first_and_common_values_pick_nothing():
    state = big_state()
    view, cut = state_view(state, {"first_name": "First42", "last_name": "Last42", "country": "USA"}, BUDGET)
    records = view["state_slice"]["records"]
    assert next(iter(records)) == "/users/user_00042"
    assert any("'USA' is found in 5000 records" in note for note in cut)
    assert not any("First42" in note for note in cut)
    assert len(json.dumps(view)) <= BUDGET


def test_an_oversized_record_is_shown_without_its_nested_parts():
    state = {"catalog": {"P1": {"name": "Shirt", "variants": {str(i): {"price": i} for i in range(5000)}}}}
    view, cut = state_view(state, {"product_id": "P1"}, 4000)
    shown = view["state_slice"]["records"]["/catalog/P1"]
    assert shown == {"name": "Shirt", "variants": "(dict of 5000 items, not shown)"}
    assert "/catalog/P1 shown without its nested parts: too large" in cut


@pytest.mark.skipif(not (RETAIL / "db.json").exists(), reason="τ² retail data not present")
def test_every_simulator_prompt_of_tau2_retail_fits_an_8k_context():
    """Every call the retail tasks expect, against the 1.3 MB retail state: the prompt fits, and the records
    the call names by id are in it."""
    state = json.loads((RETAIL / "db.json").read_text())
    tools = {t["function"]["name"]: t["function"] for t in json.loads((RETAIL / "tools.json").read_text())}
    tasks = json.loads((RETAIL / "tasks.json").read_text())
    checked = 0
    for task in tasks:
        for action in task["evaluation_criteria"]["actions"] or []:
            messages, _ = simulator_messages(
                api=tools[action["name"]],
                arguments=action["arguments"],
                task=json.dumps(task["user_scenario"]["instructions"]),
                state=state,
                history=[],
                budget=BUDGET,
            )
            assert prompt_chars(messages) <= BUDGET, action
            records = json.loads(messages[1]["content"])["state_slice"]["records"]
            order_id = action["arguments"].get("order_id")
            if order_id in state["orders"]:
                assert f"/orders/{order_id}" in records, action
            checked += 1
    assert checked > 300
