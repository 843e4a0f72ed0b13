"""The policy's program: one model turn per segment, run in process."""

import httpx
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire


class SimiaHarness(vf.Harness[vf.HarnessConfig]):
    """Sends the conversation and the session's tools to the model through verifiers' interception endpoint
    (which records the turn on the trace) and stops: the env hands the answer to Simia, whose simulator plays
    the tools and the customer, and resumes the exchange with what Simia answered."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # every segment runs on the whole conversation so far
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = [message_to_wire(message) for message in prompt or []]
        for message in messages:  # a tool-call turn: some servers refuse `content: null` (llama.cpp's)
            if message["role"] == "assistant" and message["content"] is None:
                message["content"] = ""
        if system:
            messages.insert(0, {"role": "system", "content": system})
        body = {"model": ctx.model, "messages": messages}
        if data.tools:
            body |= {"tools": data.tools, "tool_choice": "auto"}
        # No timeout of its own: the agent's rollout timeout bounds the turn.
        async with httpx.AsyncClient(timeout=None) as http:
            answer = await http.post(
                f"{endpoint}/chat/completions", json=body, headers={"Authorization": f"Bearer {secret}"}
            )
        if answer.is_error:
            return vf.ProgramResult(exit_code=1, stdout="", stderr=f"{answer.status_code}: {answer.text}")
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")
