"""Parquet rows (the Hugging Face `datasets` layout) from the canonical conversation: the OpenAI record's messages
and tools as nested columns, beside the columns a training team filters on.

- messages: a list of structs {role, content, tool_calls, tool_call_id}; tool_calls is a list of structs
  {id, type, function: {name, arguments}} (arguments the JSON string the canonical format keeps) and null on
  messages without calls, tool_call_id null except on tool messages. Dropping the nulls gives the OpenAI record.
- tools: a list of structs {type, function: {name, description, parameters}}, with `parameters` the JSON Schema as a
  JSON string: schemas differ from tool to tool (their properties, nesting and types), and one Arrow struct type
  for all of them would be the union of every schema's properties, mostly nulls, changing with every new API.
- tool_names: the tools the assistant called, in call order with repeats (filter on one API without parsing).

Pure functions over dicts, and the Arrow schema they fill: pyarrow is only needed to write the file.
"""

import orjson
import pyarrow as pa

FUNCTION_CALL = pa.struct([("name", pa.string()), ("arguments", pa.string())])
TOOL_CALL = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", FUNCTION_CALL)])
MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tool_call_id", pa.string()),
    ]
)
FUNCTION = pa.struct([("name", pa.string()), ("description", pa.string()), ("parameters", pa.string())])
TOOL = pa.struct([("type", pa.string()), ("function", FUNCTION)])

# The columns, in the order rows are built and written. The ones after `tools` describe the record: who made it
# and how it was judged and decided, for filtering without reading the messages.
SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.int64()),
        ("version", pa.int64()),
        ("domain", pa.string()),
        ("kind", pa.string()),
        ("status", pa.string()),
        ("messages", pa.list_(MESSAGE)),
        ("tools", pa.list_(TOOL)),
        ("num_turns", pa.int64()),
        ("num_tool_calls", pa.int64()),
        ("tool_names", pa.list_(pa.string())),
        ("termination_reason", pa.string()),
        ("reward", pa.float64()),
        ("judge_passed", pa.bool_()),
        ("judge_score", pa.float64()),
        ("human_decision", pa.string()),
        ("model", pa.string()),
        ("task_id", pa.int64()),
        ("seed_id", pa.int64()),
        ("job_id", pa.int64()),
    ]
)


def _message(message: dict) -> dict:
    return {
        "role": message["role"],
        "content": message["content"],
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": message.get("tool_call_id"),
    }


def _tool(tool: dict) -> dict:
    function = tool["function"]
    return {
        "type": tool["type"],
        "function": {
            "name": function["name"],
            "description": function["description"],
            "parameters": orjson.dumps(function["parameters"]).decode(),
        },
    }


def parquet_row(record: dict, about: dict) -> dict:
    """One row in SCHEMA's column order from an OpenAI record (formats.openai.canonical_to_openai, checked by
    openai_problems: a row holds that record, so that format's refusals are this one's). `about` gives
    trajectory_id, version, domain, kind, status, termination_reason, reward, judge_passed, judge_score,
    human_decision, model, task_id, seed_id and job_id; the rest is counted from the record."""
    messages = record["messages"]
    calls = [call for message in messages for call in message.get("tool_calls") or []]
    counted = {
        "messages": [_message(message) for message in messages],
        "tools": [_tool(tool) for tool in record["tools"]],
        "num_turns": sum(1 for message in messages if message["role"] in ("user", "assistant")),
        "num_tool_calls": len(calls),
        "tool_names": [call["function"]["name"] for call in calls],
    }
    return {name: counted[name] if name in counted else about.get(name) for name in SCHEMA.names}


def _feature(arrow_type: pa.DataType) -> dict:
    """One Hugging Face feature (the `dataset_info.features` YAML of a dataset card) of an Arrow type."""
    if pa.types.is_struct(arrow_type):
        return {"struct": [{"name": f.name, **_feature(f.type)} for f in arrow_type]}
    if pa.types.is_list(arrow_type):
        item = _feature(arrow_type.value_type)
        return {"list": item["struct"] if "struct" in item else item.get("dtype", item)}
    return {"dtype": {"bool": "bool", "double": "float64"}.get(str(arrow_type), str(arrow_type))}


def hf_features(schema: pa.Schema = SCHEMA) -> list[dict]:
    """The schema as a dataset card's `dataset_info.features`: what `datasets` reads the columns as."""
    return [{"name": field.name, **_feature(field.type)} for field in schema]
