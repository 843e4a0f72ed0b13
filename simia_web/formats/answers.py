"""What a model writes where JSON is asked for: the document, often wrapped in a reasoning block, a Markdown
code fence or prose. Read through the JSON gate like every document that enters."""

import re
from typing import Any

from simia_web.core.json_input import json_parse

_CODE_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S | re.I)
_THINKING = re.compile(r"<think>.*?</think>", re.S | re.I)  # reasoning models served by vLLM/Ollama


def parse_json_answer(text: str | None) -> Any:
    """Parse a model's JSON answer, tolerating reasoning blocks, a Markdown code fence or prose around it."""
    text = _THINKING.sub("", text or "").strip()
    if not text:
        raise ValueError("the answer is empty")
    fenced = _CODE_FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    # strict=False: grammar-constrained servers (llama.cpp) let raw newlines and tabs into strings.
    try:
        return json_parse(text, where="the answer", strict=False)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end and (start > 0 or end < len(text) - 1):
            return json_parse(text[start : end + 1], where="the answer", strict=False)
        raise
