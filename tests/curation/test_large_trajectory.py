"""Issue 16, row 3 for trajectories: a review page stays small whatever the trajectory holds (messages 50 a page,
long texts cut with a Show more for one message, state diffs capped) and the editor refuses what it cannot hold."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.core.clipping import EDIT_MAX_BYTES, PAGE_MESSAGES, TEXT_CHARS
from simia_web.core.display import STATE_DIFF_LINES
from simia_web.core.services import revision_record, versioned_update
from simia_web.curation.models import Review
from simia_web.curation.selectors.conversation import REVISION_ROWS
from simia_web.curation.services import trajectory_create
from tests.support.factories import TOOLS, make_trajectory, verdict

# A page of 50 messages, each cut at 4,000 characters, with its sidebar and history, stays under this.
PAGE_BYTES = 600_000
BIG_RESULT = json.dumps({"rows": "y" * 5_000_000})


def long_trajectory(count: int, *, steps=None, text: str = "z" * 10_000):
    """`count` messages alternating user and assistant, every one `text` long, each numbered."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}:{text}"} for i in range(count)]
    return make_trajectory(messages=messages, judge=verdict(cited=[3, count - 2]), steps=steps)


def big_result_trajectory(**fields):
    """A tool call answered by a 5 MB result."""
    messages = [
        {"role": "user", "content": "List every row."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cancel_order", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": BIG_RESULT},
        {"role": "assistant", "content": "Done."},
    ]
    return trajectory_create(violations=[], kind="rollout", messages=messages, tools=TOOLS, **fields)


def page(client, t, query: str = ""):
    response = client.get(f"/trajectories/{t.pk}/{query}")
    assert response.status_code == 200
    return response.content


def queries_for(client, t, query: str = "") -> int:
    with CaptureQueriesContext(connection) as queries:
        page(client, t, query)
    return len(queries)


def test_thousands_of_messages_render_one_bounded_page(client_for):
    t = long_trajectory(5000)  # 50 MB of text
    client = client_for("annotator")
    body = page(client, t)
    assert len(body) < PAGE_BYTES, len(body)
    text = body.decode()
    assert f"Page 1 of {5000 // PAGE_MESSAGES}" in text and 'id="m49"' in text and 'id="m50"' not in text
    assert "Show more (the whole message)" in text and "z" * 10_000 not in text
    assert 'href="?page=100#m4998"' in text  # the judge cited it: the link reaches its page
    last = page(client, t, "?page=100").decode()
    assert 'id="m4999"' in last and 'id="m4949"' not in last
    # The same queries as for a five-message trajectory: nothing is fetched per message.
    assert queries_for(client, t) == queries_for(client, make_trajectory())


def test_show_more_shows_that_one_message_in_full(client_for):
    t = long_trajectory(200)
    body = page(client_for("annotator"), t, "?page=3&full=120").decode()
    assert f"120:{'z' * 10_000}" in body
    cut = f"121:{'z' * 10_000}"[:TEXT_CHARS]
    assert cut in body and cut + "z" not in body
    assert 'href="?page=3&amp;full=121#m121"' in body


@pytest.mark.parametrize("full", ["²", "9" * 5000, "-1", "x"])
def test_a_tampered_full_parameter_shows_the_page_as_usual(client_for, full):
    t = long_trajectory(60)
    body = page(client_for("annotator"), t, f"?full={full}").decode()
    assert "Show more (the whole message)" in body


def test_filters_and_stream_survive_message_paging(client_for):
    t = long_trajectory(120)
    body = page(client_for("annotator"), t, "?domain=shop&page=2").decode()
    assert 'href="?domain=shop&amp;page=3"' in body
    assert 'href="?domain=shop&amp;page=2&amp;full=51#m51"' in body


def test_five_megabyte_tool_result_is_cut_until_asked_for(client_for):
    t = big_result_trajectory(domain=make_trajectory().domain)
    client = client_for("annotator")
    body = page(client, t)
    assert len(body) < 100_000, len(body)
    assert b"Show more" in body
    whole = page(client, t, "?full=2")
    assert b"y" * 5_000_000 in whole


def test_state_diffs_are_capped(client_for):
    huge = {"rows": {str(i): "v" * 100 for i in range(50_000)}}  # 5 MB of state
    many = {str(i): i for i in range(5000)}
    steps = {"1": {"state_after": many}, "3": {"state_after": huge}}
    t = long_trajectory(6, steps=steps, text="")
    body = page(client_for("annotator"), t).decode()
    assert len(body) < PAGE_BYTES, len(body)
    assert "The state is too large to compare here" in body
    assert body.count('<span class="add">') <= 2 * STATE_DIFF_LINES and "more lines." in body


def test_state_diff_on_a_later_page_starts_from_the_state_before_it(client_for):
    steps = {"10": {"state_after": {"n": 1}}, "60": {"state_after": {"n": 2}}}
    t = long_trajectory(70, steps=steps, text="")
    body = page(client_for("annotator"), t, "?page=2").decode()
    assert '<span class="del">-  &quot;n&quot;: 1</span>' in body


@pytest.mark.parametrize("maker", ["messages", "result"])
def test_editor_refuses_a_trajectory_too_large_for_the_browser(client_for, maker):
    t = long_trajectory(200) if maker == "messages" else big_result_trajectory(domain=make_trajectory().domain)
    client = client_for("annotator")
    response = client.get(f"/trajectories/{t.pk}/edit/")
    assert response.status_code == 413
    assert b"too large to edit in the browser" in response.content and b'name="msg"' not in response.content
    assert f"more than {EDIT_MAX_BYTES // 1024} KiB".encode() in response.content
    posted = client.post(f"/trajectories/{t.pk}/edit/", {"version": t.version, "msg": []})
    assert posted.status_code == 413 and not Review.objects.exists()
    t.refresh_from_db()
    assert t.version == 1


def test_editor_still_opens_a_small_trajectory(client_for, trajectory):
    response = client_for("annotator").get(f"/trajectories/{trajectory.pk}/edit/")
    assert response.status_code == 200 and b'name="msg"' in response.content


def test_revision_history_shows_a_bounded_number_of_changed_messages(client_for):
    t = long_trajectory(300)
    revision_record(obj=t, data={"messages": t.messages})
    edited = [{**m, "content": f"edited {i}:{'w' * 10_000}"} for i, m in enumerate(t.messages)]
    versioned_update(obj=t, expected_version=1, fields={"messages": edited})
    revision_record(obj=t, data={"messages": edited})
    body = page(client_for("annotator"), t)
    assert len(body) < PAGE_BYTES, len(body)
    text = body.decode()
    assert f"… and {300 - REVISION_ROWS} more changed messages." in text and "w" * 10_000 not in text
