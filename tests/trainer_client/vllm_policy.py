"""The scripted policy answering as vLLM's OpenAI-compatible server does.

Asked for `return_token_ids`, vLLM also returns the token ids of the rendered prompt and of the completion,
and each completion token's log-probability. Here the tokens are the UTF-8 bytes of a plain chat rendering
that renders history exactly as each turn was generated (a prefix-preserving template), and every generated
token has the log-probability LOGPROB.
"""

import json
import time
import uuid

from tests.support.llm_stub import Reply, Request
from tests.support.scripts import agent_reply

LOGPROB = -0.5


def turn_text(message: dict) -> str:
    """A message as rendered after its role marker: content, calls, end marker (an assistant's: what it generated)."""
    calls = "".join(
        f"<call>{call['function']['name']} {call['function']['arguments']}" for call in message.get("tool_calls") or []
    )
    return f"{message.get('content') or ''}{calls}<|end|>"


def render_prompt(messages: list[dict], tools: list[dict]) -> str:
    """The conversation as the model reads it, ending where the assistant's next turn starts."""
    names = ",".join(tool["function"]["name"] for tool in tools)
    turns = "".join(f"<|{m['role']}|>{turn_text(m)}" for m in messages)
    return f"<|tools|>{names}<|end|>{turns}<|assistant|>"


def tokens(text: str) -> list[int]:
    return list(text.encode())


def policy(request: Request) -> Reply:
    """agent_reply's decision (call cancel_order, then answer), written out as a vLLM chat completion."""
    decided = agent_reply(request)
    message = {"role": "assistant", "content": decided.content}
    if decided.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
            for call in decided.tool_calls
        ]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if decided.tool_calls else "stop"}
    completion = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.body.get("model", "policy"),
        "choices": [choice],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }
    if request.body.get("return_token_ids"):
        generated = tokens(turn_text(message))
        completion["prompt_token_ids"] = tokens(render_prompt(request.messages, request.body.get("tools") or []))
        choice["token_ids"] = generated
        choice["logprobs"] = {
            "content": [{"token": f"token_id:{t}", "logprob": LOGPROB, "top_logprobs": []} for t in generated]
        }
    return Reply(raw_body=json.dumps(completion))
