"""Signatures stored as their bare MinHash values (little-endian uint32, one per permutation) instead of
datasketch's LeanMinHash serialization, which a reader had to parse value by value. Band keys hash the same
values, so the bands stay as they are."""

import numpy as np
from datasketch import LeanMinHash
from django.db import migrations, models

NUM_PERM, SEED, SCHEME = 128, 1, "affine32"  # dedup.minhash's, as they were when this was written
STORED = np.dtype("<u4")
BATCH = 2000


def _rewrite(apps, convert) -> None:
    Signature = apps.get_model("dedup", "Signature")
    batch = []
    for row in Signature.objects.only("pk", "minhash").order_by("pk").iterator(chunk_size=BATCH):
        row.minhash = convert(bytes(row.minhash))
        batch.append(row)
        if len(batch) == BATCH:
            Signature.objects.bulk_update(batch, ["minhash"])
            batch = []
    Signature.objects.bulk_update(batch, ["minhash"])


def to_values(apps, schema_editor) -> None:
    _rewrite(apps, lambda data: LeanMinHash.deserialize(data).hashvalues.astype(STORED).tobytes())


def to_lean_minhash(apps, schema_editor) -> None:
    def convert(data: bytes) -> bytes:
        minhash = LeanMinHash(seed=SEED, hashvalues=np.frombuffer(data, dtype=STORED), scheme=SCHEME)
        buffer = bytearray(minhash.bytesize())
        minhash.serialize(buffer)
        return bytes(buffer)

    _rewrite(apps, convert)


class Migration(migrations.Migration):
    dependencies = [("dedup", "0001_initial")]

    operations = [
        migrations.AlterField(
            model_name="signature",
            name="minhash",
            field=models.BinaryField(help_text="The MinHash values of the item's text (dedup.minhash.signature_bytes)."),
        ),
        migrations.RunPython(to_values, to_lean_minhash),
    ]
