"""ShareGPT and OpenAI chat record files → seed specs in the canonical format."""

from django.conf import settings

from simia_web.formats import FormatError
from simia_web.formats.openai import openai_record_to_canonical
from simia_web.formats.sharegpt import sharegpt_record_to_canonical

from .errors import Collected, ImportIssue
from .reading import records_read

CONVERTERS = {"sharegpt": sharegpt_record_to_canonical, "openai": openai_record_to_canonical}


def seed_specs_read(source, name: str, format: str) -> tuple[list[dict], list[ImportIssue]]:
    """[{"messages", "tools", "record"(number), "line"}] and the problems that refuse the file."""
    try:
        records = records_read(source, name)
    except Collected as exc:
        return [], [exc.issue]
    if not records:
        return [], [ImportIssue(name, None, "", "the file holds no records")]
    convert = CONVERTERS[format]
    max_messages = settings.SIMIA_IMPORT_MAX_MESSAGES
    specs, issues = [], []
    for record in records:
        try:
            messages, tools = convert(record.value)
        except FormatError as exc:
            issues.append(ImportIssue(name, record.line, exc.field, exc.message, record.number))
            continue
        if len(messages) > max_messages:
            why = f"{len(messages):,} messages; the limit is {max_messages:,} per record (SIMIA_IMPORT_MAX_MESSAGES)"
            issues.append(ImportIssue(name, record.line, "messages", why, record.number))
            continue
        specs.append({"messages": messages, "tools": tools, "record": record.number, "line": record.line})
    return specs, issues
