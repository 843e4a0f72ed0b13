"""The episode: a Simia session, the policy's turns relayed to it, its answers relayed back."""

import contextlib
import hashlib
import os
import uuid

import httpx
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire

from simia_client import ApiError


class SimiaEnvConfig(vf.EnvConfig):
    # The policy's program runs in this process and executes nothing: no sandbox to provision.
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The policy's seat (`--env.agent.*`)."""


class SimiaEnv(vf.Env[SimiaEnvConfig]):
    """Opens a Simia session for the task and drives the policy's interaction: each policy turn is a step,
    and what the step answers (tool results, or the simulated customer's reply) is the next turn's input,
    until Simia ends the episode. The rollouts of one task in a run (`-r`, a GRPO group) form one Simia group.
    An episode cut short on this side (an agent limit, an error) is abandoned: stored by Simia, unjudged."""

    def __init__(self, config: SimiaEnvConfig) -> None:
        super().__init__(config)
        # The eval names its run in VF_RUN_ID for every process it starts; elsewhere this env instance is the run.
        self.run_id = os.environ.get("VF_RUN_ID") or uuid.uuid4().hex

    async def run(self, task, agents) -> None:
        data = task.data
        group = f"{self.run_id}-{hashlib.sha256(task.key.encode()).hexdigest()[:16]}"
        async with data.client() as simia:
            session = await simia.reset(group=group, **data.reset)
            played = task.with_data(
                prompt=None, system_prompt=session.opening.system, session=session.id, tools=session.tools
            )
            try:
                async with agents.agent.interaction(played) as interaction:
                    observation = session.opening.observation
                    while not session.done:
                        segment = await interaction.turn(observation)
                        replies = [m for m in segment.messages if isinstance(m, vf.AssistantMessage)]
                        if segment.terminated or not replies:
                            break
                        observation = (await session.step(message_to_wire(replies[-1]))).observation
                    if not session.done:  # stopped by this side's limits: leave nothing open
                        await session.abandon()
                    interaction.trace.stop(session.result.termination_reason)
            except BaseException:
                if not session.done:
                    with contextlib.suppress(ApiError, httpx.HTTPError):  # the error at hand is the one to raise
                        await session.abandon()
                raise
