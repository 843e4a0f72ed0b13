"""The review pages' forms: bulk decisions by ids or filter, the agreement filters, and the trajectory editor's
parsing of edited messages and tool calls into the canonical conversation."""

import json
import re

from django import forms
from django.contrib.auth import get_user_model

from simia_web.accounts.scoping import scoped
from simia_web.catalog.models import Domain
from simia_web.core.json_input import json_parse
from simia_web.curation.selectors.people import workspace_people
from simia_web.formats.conversation import ROLES, message_text, parse_arguments, tool_call, tool_call_id, tool_schemas
from simia_web.formats.rules import call_violations


def editor_json_parse(text: str):
    """Parse JSON typed into a page's editor: (value, None) or (None, the error to show next to the field).

    The single place the workspace reads JSON from a form, so an input gate can replace it.
    """
    try:
        return json_parse(text, where="the editor"), None
    except ValueError as exc:
        return None, f"Not valid JSON: {exc}"


class AnyIdsField(forms.TypedMultipleChoiceField):
    """Row ids: the view checks them against the filtered queue, so any integer is accepted here."""

    def valid_value(self, value) -> bool:
        return str(value).isdigit()


class BulkForm(forms.Form):
    ACTIONS = [
        ("accept", "Accept"),
        ("reject", "Reject"),
        ("assign", "Assign to"),
        ("unassign", "Unassign"),
        ("send_back", "Send back for review"),
    ]
    action = forms.ChoiceField(choices=ACTIONS)
    scope = forms.ChoiceField(choices=[("selected", "Selected"), ("all", "All matching the filter")])
    ids = AnyIdsField(coerce=int, required=False, choices=[])
    reason = forms.CharField(required=False, max_length=2000)
    # The count the curator confirmed; a different count now means the filter matched something else: ask again.
    confirmed = forms.IntegerField(required=False, min_value=0)
    assignee = forms.ModelChoiceField(get_user_model().objects.none(), required=False, empty_label="Assignee")

    def __init__(self, *args, workspace_ids: list[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["assignee"].queryset = workspace_people(workspace_ids=workspace_ids)  # type: ignore[attr-defined]

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if data.get("action") == "reject" and not (data.get("reason") or "").strip():
            self.add_error("reason", "A rejection needs a reason.")
        if data.get("action") == "assign" and not data.get("assignee"):
            self.add_error("assignee", "Choose who to assign to.")
        if data.get("scope") == "selected" and not data.get("ids"):
            self.add_error("ids", "Select at least one trajectory.")
        return data


class AgreementFilterForm(forms.Form):
    domain = forms.ModelChoiceField(Domain.objects.none(), required=False, empty_label="Any domain")
    job = forms.IntegerField(required=False, min_value=1, widget=forms.NumberInput(attrs={"placeholder": "Job id"}))
    profile = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, workspace_ids: list[int], profiles=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["domain"].queryset = scoped(Domain.objects.all(), workspace_ids)  # type: ignore[attr-defined]
        self.fields["profile"] = forms.TypedChoiceField(
            choices=[("", "Any judge profile"), *[(p.pk, str(p)) for p in profiles]],
            coerce=int,
            required=False,
            empty_value=None,
        )


def _call_errors(name: str, arguments_text: str, schemas: dict) -> tuple[dict | None, str, str]:
    """(arguments, error for the name field, error for the arguments field) of one edited tool call."""
    arguments, error = editor_json_parse(arguments_text.strip() or "{}")
    if error:
        return None, "", error
    if not isinstance(arguments, dict):
        return None, "", "Arguments must be a JSON object."
    call = {"function": {"name": name, "arguments": json.dumps(arguments)}}
    problems = call_violations(call, schemas, None)
    name_errors = [p.detail for p in problems if p.code == "unknown_tool"]
    argument_errors = [p.detail for p in problems if p.code != "unknown_tool"]
    return arguments, "; ".join(name_errors), "; ".join(argument_errors)


def tool_call_check(data, tools: list) -> dict[str, str]:
    """Errors of the one tool call posted by the editor's inline check, keyed by its field names."""
    name_field = next((k for k in data if k.endswith("-name")), None)
    args_field = next((k for k in data if k.endswith("-args")), None)
    if not name_field or not args_field:
        return {}
    _, name_error, args_error = _call_errors(data[name_field].strip(), data[args_field], tool_schemas(tools))
    return {name_field: name_error, args_field: args_error}


def editor_messages(data, original: list[dict], tools: list) -> tuple[list[dict], dict[str, str]]:
    """The conversation posted by the editor, in the order its message blocks were on the page.

    Each block posts `msg` (its key: the original index, or a new key), role-K, content-K, tool_call_id-K, and
    per tool call `call-K` (the call's key J) with call-K-J-id, -name and -args. Returns the messages and errors
    keyed by the field they belong next to; tool-call arguments are checked against the tool's schema.
    """
    schemas = tool_schemas(tools)
    messages, errors = [], {}
    for key in data.getlist("msg"):
        base = original[int(key)] if key.isdigit() and int(key) < len(original) else {}
        message = {k: v for k, v in base.items() if k not in ("content", "tool_calls", "tool_call_id")}
        message["role"] = data.get(f"role-{key}", base.get("role", "user"))
        if message["role"] not in ROLES:
            errors[f"role-{key}"] = "Choose system, user, assistant or tool."
        content = data.get(f"content-{key}", "").replace("\r\n", "\n")
        calls = []
        for j in data.getlist(f"call-{key}"):
            field = f"call-{key}-{j}"
            name = data.get(f"{field}-name", "").strip()
            arguments, name_error, args_error = _call_errors(name, data.get(f"{field}-args", ""), schemas)
            if name_error:
                errors[f"{field}-name"] = name_error
            if args_error:
                errors[f"{field}-args"] = args_error
            calls.append(tool_call(data.get(f"{field}-id") or tool_call_id(key, j), name, arguments or {}))
        if calls and message["role"] == "assistant":
            message["content"] = content or None
            message["tool_calls"] = calls
        else:
            message["content"] = content
        if message["role"] == "tool":
            message["tool_call_id"] = data.get(f"tool_call_id-{key}", "").strip()
        messages.append(message)
    if not messages:
        errors["messages"] = "A conversation needs at least one message."
    return messages, errors


def editor_blocks(messages: list[dict]) -> list[dict]:
    """The editor's message blocks (for the page): role, text and tool calls with pretty arguments."""
    blocks = []
    for index, message in enumerate(messages):
        calls = []
        for j, call in enumerate(message.get("tool_calls") or []):
            arguments, error = parse_arguments(call)
            raw = (call.get("function") or {}).get("arguments", "")
            calls.append(
                {
                    "key": j,
                    "id": call.get("id", ""),
                    "name": (call.get("function") or {}).get("name", ""),
                    "args": json.dumps(arguments, indent=2, ensure_ascii=False) if error is None else str(raw),
                }
            )
        content = message.get("content")
        blocks.append(
            {
                "key": str(index),
                "role": message.get("role", ""),
                "content": message_text(message) if not isinstance(content, str) else content,
                "tool_call_id": message.get("tool_call_id", ""),
                "calls": calls,
            }
        )
    return blocks


# A field of a conversation as the gate names it: messages[3].role, messages[2].tool_calls[0].function.name, ...
_MESSAGE_FIELD = re.compile(
    r"messages\[(\d+)\] (?: \.(role|content|tool_call_id) | \.tool_calls\[(\d+)\] (?:\.(?:function\.)?(\w+))? )? .*",
    re.VERBOSE,
)


def editor_error_field(data, field: str) -> str:
    """The editor's form field a gate refusal names (`messages[3].tool_calls[0].function.name` is the name field of
    that call's block), so the error shows beside it; `messages` (the top of the form) when it names none."""
    found = _MESSAGE_FIELD.fullmatch(field or "")
    keys = data.getlist("msg")
    if found is None or int(found[1]) >= len(keys):
        return "messages"
    key = keys[int(found[1])]
    part, call, call_part = found[2], found[3], found[4]
    if call is not None:
        call_keys = data.getlist(f"call-{key}")
        if int(call) >= len(call_keys):
            return f"message-{key}"
        return f"call-{key}-{call_keys[int(call)]}-{'name' if call_part == 'name' else 'args'}"
    if part in ("role", "tool_call_id"):
        return f"{part}-{key}"
    return f"message-{key}"


def editor_blocks_posted(data, errors: dict[str, str]) -> list[dict]:
    """The blocks as the annotator left them after a refused save (nothing typed is lost), errors beside fields."""
    blocks = []
    for key in data.getlist("msg"):
        calls = [
            {
                "key": j,
                "id": data.get(f"call-{key}-{j}-id", ""),
                "name": data.get(f"call-{key}-{j}-name", ""),
                "args": data.get(f"call-{key}-{j}-args", ""),
                "name_error": errors.get(f"call-{key}-{j}-name", ""),
                "args_error": errors.get(f"call-{key}-{j}-args", ""),
            }
            for j in data.getlist(f"call-{key}")
        ]
        blocks.append(
            {
                "key": key,
                "role": data.get(f"role-{key}", ""),
                "content": data.get(f"content-{key}", ""),
                "tool_call_id": data.get(f"tool_call_id-{key}", ""),
                "calls": calls,
                "role_error": errors.get(f"role-{key}", ""),
                "tool_call_id_error": errors.get(f"tool_call_id-{key}", ""),
                "error": errors.get(f"message-{key}", ""),
            }
        )
    return blocks
