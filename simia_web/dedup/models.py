"""The near-duplicate index: one signature per indexed item, and one row per LSH band of it.

Items are named by corpus ("trajectory", "task": see dedup.corpora) and id, with no foreign key, so this
package sits below the apps whose rows it indexes. The index lives in the database beside those rows and is
written in the same transaction as the text it describes: every process (web, worker, command) sees the same
index, nothing has to be loaded into memory to answer, and a rebuild re-derives bands and clusters from the
stored signatures without reading any text.
"""

from django.db import models
from django.db.models import F, Q

from simia_web.accounts.models import owner_workspace_field


class Signature(models.Model):
    corpus = models.CharField(max_length=16)
    item_id = models.BigIntegerField()
    minhash = models.BinaryField(help_text="The MinHash values of the item's text (dedup.minhash.signature_bytes).")
    # The item's cluster, named by its representative's item_id (the representative's own row names itself);
    # null while the item is near-duplicate of no representative.
    cluster = models.BigIntegerField(null=True, blank=True)
    workspace = owner_workspace_field()

    workspace_path = "workspace"

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "item_id"], name="dedup_signature_item")]
        indexes = [
            models.Index(
                fields=["corpus", "cluster"], name="dedup_signature_cluster", condition=Q(cluster__isnull=False)
            ),
            # The clusters list: one row per cluster (its representative), in id order.
            models.Index(fields=["corpus", "item_id"], name="dedup_cluster_heads", condition=Q(cluster=F("item_id"))),
        ]

    def __str__(self):
        return f"{self.corpus} {self.item_id}"


class Band(models.Model):
    """One LSH band of a signature as a 64-bit key (dedup.minhash.band_keys): the primary key's index answers a
    lookup by key from the index alone."""

    pk = models.CompositePrimaryKey("key", "signature")
    key = models.BigIntegerField()
    signature = models.ForeignKey(Signature, on_delete=models.CASCADE, related_name="bands")

    workspace_path = "signature__workspace"

    def __str__(self):
        return f"band {self.key} of {self.signature_id}"
