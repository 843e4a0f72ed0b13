"""Imports refuse what would exhaust memory or break the domain later, naming the file, record and limit;
nothing is written when they do."""

import io
import json
import os
import struct
import tracemalloc
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from simia_web.catalog.importers import ImportRejected, seeds_import
from simia_web.catalog.models import Api, Domain, Seed, Task
from tests.catalog.test_import import TOOL, counts, jsonl, openai_record

POLICY = b"Be helpful."
TOOLS = json.dumps([TOOL]).encode()
TASK = {"id": "1", "user_scenario": {"instructions": "Find order W1."}, "evaluation_criteria": {}}


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


# JSON texts that crashed a parser, the database or orjson before, and the limit each is refused with.
HOSTILE = {
    "nested 100k deep": ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    "an object 600 deep": (nested(600), "nested deeper than 64 levels"),
    "a 5000-digit integer": ("1" * 5000, "does not fit in 64 bits"),
    "2**70": (str(2**70), "does not fit in 64 bits"),
    "NaN": ("NaN", "NaN is not a JSON number"),
    "-Infinity": ("-Infinity", "-Infinity is not a JSON number"),
    "1e999": ("1e999", "is out of range"),
}


def tau2_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(f"shop/{name}", data)
    return buffer.getvalue()


def lying_zip(inflated_mib: int) -> bytes:
    """A τ² zip whose tasks.json inflates to `inflated_mib` MiB of spaces while its headers say 2 bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("shop/policy.md", POLICY)
        archive.writestr("shop/tools.json", TOOLS)
        with archive.open("shop/tasks.json", "w") as member:
            for _ in range(inflated_mib):
                member.write(b" " * (1 << 20))
        offset = archive.getinfo("shop/tasks.json").header_offset
    data = bytearray(buffer.getvalue())
    data[offset + 22 : offset + 26] = struct.pack("<I", 2)  # local header: uncompressed size
    central = data.rfind(b"PK\x01\x02")  # tasks.json's is the last central directory entry
    data[central + 24 : central + 28] = struct.pack("<I", 2)
    return bytes(data)


def test_lying_zip_header_is_refused_with_bounded_memory(db):
    """Row 1: the declared size is not trusted; inflated bytes are counted as read and the CRC catches the lie."""
    upload = SimpleUploadedFile("shop.zip", lying_zip(1024))  # 1 GiB of spaces, as in the issue
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        with pytest.raises(ImportRejected) as refused:
            seeds_import(source=upload, format="tau2")
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert peak < 200 * 1024 * 1024, f"peak memory grew by {peak / 2**20:.0f} MiB"
    assert "tasks.json" in str(refused.value) and "damaged zip member" in str(refused.value)
    assert counts() == (0, 0, 0, 0, 0)


def test_zip_member_inflating_past_the_limit_is_refused(db, settings):
    settings.SIMIA_IMPORT_MAX_BYTES = 100_000
    data = tau2_zip({"policy.md": POLICY, "tools.json": TOOLS, "tasks.json": b" " * 1_000_000 + b"[]"})
    assert len(data) < settings.SIMIA_IMPORT_MAX_BYTES
    with pytest.raises(ImportRejected, match=r"shop/tasks.json: file is larger than allowed; the limit is 100,000"):
        seeds_import(source=SimpleUploadedFile("shop.zip", data), format="tau2")


def test_damaged_zip_is_refused_over_rest(client_for):
    """Row 1: a wrong CRC was a 500 (BadZipFile)."""
    data = bytearray(tau2_zip({"policy.md": POLICY, "tools.json": TOOLS, "tasks.json": json.dumps([TASK]).encode()}))
    entry = data.find(b"PK\x01\x02")
    while entry >= 0:  # every central directory entry's CRC is wrong
        data[entry + 16 : entry + 20] = b"\x00\x00\x00\x00"
        entry = data.find(b"PK\x01\x02", entry + 4)
    response = client_for("curator").post(
        "/api/v1/seeds/upload/", {"file": SimpleUploadedFile("shop.zip", bytes(data)), "format": "tau2"}
    )
    assert response.status_code == 400
    assert "damaged zip member" in response.json()["detail"]


def test_zip_with_too_many_entries_is_refused(db, settings):
    """Row 3: a zip of thousands of entries is refused by count."""
    settings.SIMIA_IMPORT_MAX_ZIP_MEMBERS = 50
    members = {"policy.md": POLICY, "tools.json": TOOLS, "tasks.json": b"[]"}
    members.update({f"junk/{i}.txt": b"" for i in range(60)})
    with pytest.raises(ImportRejected, match="holds 63 entries; the limit is 50"):
        seeds_import(source=SimpleUploadedFile("shop.zip", tau2_zip(members)), format="tau2")


def test_record_with_too_many_messages_is_refused(db, tmp_path, settings):
    """Row 3: a record of a million messages is refused (messages per record), naming its line."""
    settings.SIMIA_IMPORT_MAX_MESSAGES = 10
    record = openai_record(1)
    record["messages"] = record["messages"] * 5
    path = tmp_path / "seeds.jsonl"
    path.write_text(jsonl([openai_record(0), record]))
    with pytest.raises(ImportRejected, match=r"line 2 \(record 2\): messages: 20 messages; the limit is 10"):
        seeds_import(source=path, format="openai")
    assert counts() == (0, 0, 0, 0, 0)


@pytest.mark.parametrize("value,limit", list(HOSTILE.values()), ids=list(HOSTILE))
@pytest.mark.parametrize("layout", ["jsonl", "array"])
def test_hostile_values_in_seed_files_are_refused(db, tmp_path, value, limit, layout):
    """Row 4: each of these was a traceback (RecursionError, ValueError, orjson or SQLite errors)."""
    good = json.dumps(openai_record(1))
    bad = json.dumps(openai_record(2))[:-1] + f', "extra": {value}}}'
    text = f"{good}\n{bad}\n" if layout == "jsonl" else f"[{good},\n{bad}]"
    path = tmp_path / f"seeds.{layout}"
    path.write_text(text)
    with pytest.raises(ImportRejected, match=limit) as refused:
        seeds_import(source=path, format="openai")
    assert "line 2 (record 2)" in str(refused.value)
    assert counts() == (0, 0, 0, 0, 0)


def test_hostile_values_in_a_tau2_folder_are_refused(db, tmp_path):
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "policy.md").write_bytes(POLICY)
    (folder / "tasks.json").write_text(json.dumps([TASK]))
    for value, limit in HOSTILE.values():
        (folder / "tools.json").write_text(f'[{{"type": "function", "function": {value}}}]')
        with pytest.raises(ImportRejected, match=limit):
            seeds_import(source=folder, format="tau2")
    assert counts() == (0, 0, 0, 0, 0)


def test_deep_world_state_is_refused_at_import(db, tmp_path):
    """Row 5: a db.json nested 600 deep used to import and then break every environment and job on it."""
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "policy.md").write_bytes(POLICY)
    (folder / "tools.json").write_bytes(TOOLS)
    (folder / "tasks.json").write_text(json.dumps([TASK]))
    (folder / "db.json").write_text('{"orders": ' + nested(600) + "}")
    with pytest.raises(ImportRejected, match=r"db.json.*orders(\.a)+.*nested deeper than 64 levels"):
        seeds_import(source=folder, format="tau2")
    assert not Domain.objects.exists() and not Api.objects.exists() and not Task.objects.exists()


def test_schema_pattern_that_re2_cannot_run_is_refused(db, tmp_path):
    """Row 2: a tool whose schema needs backtracking (a backreference) is refused at import."""
    tool = json.loads(json.dumps(TOOL))
    tool["function"]["parameters"]["properties"]["order_id"]["pattern"] = r"^(a)\1$"
    record = openai_record(1)
    record["tools"] = [tool]
    path = tmp_path / "seeds.jsonl"
    path.write_text(jsonl([record]))
    seeds_import(source=path, format="openai", domain="shop")
    api = Api.objects.get(name="get_order")
    assert not api.valid and "cannot run in linear time" in json.dumps(api.errors)
    assert not Seed.objects.get().usable


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_command_reads_regular_files_only(db, tmp_path, special):
    """Row 12: /dev/zero used to be read until MemoryError, and a FIFO hung."""
    path = tmp_path / "seeds.jsonl"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "folder":
        path.mkdir()
    else:
        path = special
    with pytest.raises(CommandError, match="not a regular file|reads a file, not a folder"):
        call_command("import_seeds", str(path), "--format", "openai")
    if special != "folder":  # a folder is what a τ² import reads
        with pytest.raises(CommandError, match="not a regular file"):
            call_command("import_seeds", str(path), "--format", "tau2")
