"""Stored conversations whose tool calls got the simulated responses a test chooses, and the fidelity report."""

import json

from simia_web.catalog.models import Domain
from simia_web.curation.models import Trajectory, TrajectoryKind


def trajectory(domain: Domain, calls: list[tuple], *, steps: dict | None = None) -> Trajectory:
    """A stored conversation whose tool calls got the simulated responses given: [(api, arguments, response)]."""
    messages = [{"role": "system", "content": "You are a shop assistant."}, {"role": "user", "content": "Help me."}]
    for i, (api, arguments, response) in enumerate(calls):
        call = {"id": f"c{i}", "type": "function", "function": {"name": api, "arguments": json.dumps(arguments)}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        content = response if isinstance(response, str) else json.dumps(response)
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": content})
    messages.append({"role": "assistant", "content": "Done."})
    return Trajectory.objects.create(
        kind=TrajectoryKind.ROLLOUT,
        domain=domain,
        messages=messages,
        tools=[api.as_tool() for api in domain.apis.all()],
        steps=steps or {},
        tool_call_count=len(calls),
        turns=len(calls) + 1,
    )


def report_of(output: str) -> dict:
    """The JSON report the command prints last."""
    return json.loads(output[output.rindex("\n{") + 1 :])
