"""Peak memory of refusing the zip bomb of issue 16: a τ² zip whose tasks.json inflates to 1 GiB of spaces
while its headers say 2 bytes. Before, the whole member was inflated first (the web process grew by 2 GB);
now members are inflated a chunk at a time and counted, and the CRC check catches the lie.

    .venv/bin/python bench/import_memory.py [MiB inflated, default 1024]
"""

import io
import os
import struct
import sys
import tracemalloc
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

import psutil  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402

from simia_web.catalog.importers import ImportRejected, seeds_import  # noqa: E402


def lying_zip(inflated_mib: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("shop/policy.md", "Be helpful.")
        archive.writestr("shop/tools.json", "[]")
        with archive.open("shop/tasks.json", "w") as member:
            for _ in range(inflated_mib):
                member.write(b" " * (1 << 20))
        offset = archive.getinfo("shop/tasks.json").header_offset
    data = bytearray(buffer.getvalue())
    data[offset + 22 : offset + 26] = struct.pack("<I", 2)
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = struct.pack("<I", 2)
    return bytes(data)


def main() -> None:
    inflated = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    data = lying_zip(inflated)
    process = psutil.Process()
    rss_before = process.memory_info().rss
    tracemalloc.start()
    try:
        seeds_import(source=SimpleUploadedFile("bomb.zip", data), format="tau2")
        outcome = "imported (unexpected)"
    except ImportRejected as exc:
        outcome = f"refused: {exc.errors[0]}"
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss_growth = process.memory_info().rss - rss_before
    print(f"zip of {len(data) / 2**20:.1f} MiB inflating to {inflated} MiB behind a 2-byte header: {outcome}")
    print(f"peak traced allocations during the import: {peak / 2**20:.1f} MiB; RSS growth {rss_growth / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
