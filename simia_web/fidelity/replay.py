"""Replaying a trajectory's tool calls against a reference, in order, in one fresh session.

Only the calls the simulator answered are replayed: a call the episode refused before asking it (arguments that
break the schema, a spent budget) or that the simulator failed to answer has no simulated response to set
against the reference's, and is counted as skipped. A call the reference cannot answer is a reference error;
when the session cannot even be opened, every call of the trajectory is one, with the reason."""

from dataclasses import asdict, dataclass

from simia_web.catalog.mcp import McpUnavailable
from simia_web.catalog.references import ReferenceConfig, ReferenceSession
from simia_web.formats.conversation import parse_arguments

from .compare import compare, response_value
from .models import Outcome


@dataclass
class CallToReplay:
    message_index: int
    position: int
    api: str
    arguments: dict
    simulated: object


@dataclass
class ReplayedCall(CallToReplay):
    reference: object = None
    reference_is_error: bool = False
    outcome: str = ""
    detail: str = ""

    def as_fields(self) -> dict:
        return asdict(self)


@dataclass
class TrajectoryReplay:
    calls: list[ReplayedCall]
    skipped: int
    error: str = ""  # the session could not be opened


def calls_to_replay(messages: list[dict], steps: dict) -> tuple[list[CallToReplay], int]:
    """The calls the simulator answered, in the order they were made, and how many others were skipped."""
    results = {
        message.get("tool_call_id"): index
        for index, message in enumerate(messages)
        if isinstance(message, dict) and message.get("role") == "tool"
    }
    calls, skipped = [], 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for position, call in enumerate(message.get("tool_calls") or []):
            result_index = results.get(call.get("id")) if isinstance(call, dict) else None
            if result_index is None:  # no result to compare with
                skipped += 1
                continue
            step = steps.get(str(result_index)) or {}
            arguments, problem = parse_arguments(call)
            if problem or step.get("rejected") or step.get("simulator_failed") or step.get("environment"):
                skipped += 1
                continue
            calls.append(
                CallToReplay(
                    message_index=index,
                    position=position,
                    api=str((call.get("function") or {}).get("name", "")),
                    arguments=arguments,
                    simulated=response_value(messages[result_index].get("content")),
                )
            )
    return calls, skipped


def trajectory_replay(*, config: ReferenceConfig, messages: list[dict], steps: dict) -> TrajectoryReplay:
    calls, skipped = calls_to_replay(messages, steps)
    if not calls:
        return TrajectoryReplay(calls=[], skipped=skipped)
    try:
        with ReferenceSession(config) as session:
            replayed = [_replayed(call, session.call(call.api, call.arguments)) for call in calls]
    except McpUnavailable as exc:
        failed = [ReplayedCall(**asdict(call), outcome=Outcome.REFERENCE_ERROR, detail=str(exc)) for call in calls]
        return TrajectoryReplay(calls=failed, skipped=skipped, error=str(exc))
    return TrajectoryReplay(calls=replayed, skipped=skipped)


def _replayed(call: CallToReplay, answer) -> ReplayedCall:
    if answer.error:
        return ReplayedCall(**asdict(call), outcome=Outcome.REFERENCE_ERROR, detail=answer.error)
    reference = response_value(answer.value)
    outcome, detail = compare(call.simulated, reference, reference_is_error=answer.is_error)
    return ReplayedCall(
        **asdict(call),
        reference=reference,
        reference_is_error=answer.is_error,
        outcome=outcome,
        detail=detail,
    )
