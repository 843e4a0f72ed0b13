"""A model that writes whatever a grammar lets it write: a small model on a server that enforces JSON Schemas.

llama.cpp and llama-cpp-python turn `response_format.schema` and each tool's `parameters` into a grammar, so
even SmolLM2-135M answers with an instance of the schema sent, and knows nothing else of the task. This
responder does the same: each answer is a random instance of the request's schema (required properties
always, optional ones at random, as many items as allowed), each tool call a random instance of a tool's
parameters. What a grammar cannot hold a model to (a number's minimum, what a string means, whether an
id exists) it gets wrong as often as right, so the pipeline must get through such answers on its own.
"""

import random
import string

import rstr

from .llm_stub import Reply, Request

WORDS = ("order", "user", "item", "status", "refund", "cancel", "the", "a", "price", "ship", "W1", "42")
SCALARS = ("string", "integer", "number", "boolean", "null")


class GrammarModel:
    def __init__(self, seed: int = 0, text_chance: float = 0.3):
        self.random = random.Random(seed)
        self.rstr = rstr.Rstr(self.random)
        self.text_chance = text_chance  # how often, offered tools, it answers in text instead of a call

    def __call__(self, request: Request) -> Reply:
        body = request.body
        schema = (body.get("response_format") or {}).get("schema")
        if schema is not None:
            return Reply(content=self.instance(schema))
        tools = body.get("tools") or []
        if tools and self.random.random() >= self.text_chance:
            function = self.random.choice(tools)["function"]
            return Reply(tool_calls=[{"name": function["name"], "arguments": self.instance(function["parameters"])}])
        return Reply(content=self.text(1, 60))

    def instance(self, schema: dict, depth: int = 0):
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.random.choice(schema["enum"])
        if "anyOf" in schema:
            return self.instance(self.random.choice(schema["anyOf"]), depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = self.random.choice(kind)
        if kind is None:
            kind = "object" if "properties" in schema or depth < 2 else self.random.choice(SCALARS)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            low = schema.get("minItems", 0)
            count = self.random.randint(low, min(schema.get("maxItems", low + 3), low + 3))
            return [self.instance(schema.get("items") or {}, depth + 1) for _ in range(count)]
        if kind == "string":
            if "pattern" in schema:
                return self.rstr.xeger(schema["pattern"])[:200]
            return self.text(schema.get("minLength", 0), min(schema.get("maxLength", 40), 40))
        if kind == "integer":
            return self.random.randint(-3, 30)  # a grammar has no minimum
        if kind == "number":
            return self.random.choice([-1, 0, 0.5, 1, 7.25])
        if kind == "boolean":
            return self.random.random() < 0.5
        return None

    def _object(self, schema: dict, depth: int) -> dict:
        required = set(schema.get("required", []))
        value = {
            name: self.instance(sub, depth + 1)
            for name, sub in (schema.get("properties") or {}).items()
            if name in required or self.random.random() < 0.5
        }
        extra = schema.get("additionalProperties", "properties" not in schema and depth < 3)
        if extra is not False and depth < 4:
            low = schema.get("minProperties", 0)
            extra = extra if isinstance(extra, dict) else {}
            for _ in range(self.random.randint(low, min(schema.get("maxProperties", low + 2), low + 2))):
                value[self.text(1, 8).replace(" ", "_")] = self.instance(extra, depth + 1)
        return value

    def text(self, low: int, high: int) -> str:
        words = []
        while len(" ".join(words)) < low or (self.random.random() < 0.7 and len(" ".join(words)) < high):
            words.append(self.random.choice(WORDS + tuple(string.ascii_lowercase)))
        return " ".join(words)[: max(high, low)]
