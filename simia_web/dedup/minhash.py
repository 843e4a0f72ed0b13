"""MinHash signatures of texts and the LSH bands they are found by (datasketch, public API only).

A text is the set of its word 3-shingles, the same shingles the exact near-duplicate rule compares
(formats.rules.shingles), so a signature's Jaccard estimate and that rule's exact score measure one thing.
The banding (how many bands of how many rows) is what datasketch's MinHashLSH optimizer chooses for the
threshold, weighted towards recall: candidates are always verified against the threshold, so a false
candidate costs one comparison while a missed one is a duplicate nobody sees. With 128 permutations that is
16 bands of 8 rows: a pair at similarity 0.8 is a candidate with probability 0.95, at 0.9 with 0.9999, at 0.5
with 0.06.

Each band is stored as one 64-bit key (corpus, band number and the band's hash values, hashed together), so
the index is a table with an index on the key and a lookup is one indexed IN query (see dedup.models).
"""

import hashlib

from datasketch import LeanMinHash, MinHash, MinHashLSH

from simia_web.formats.rules import NEAR_DUPLICATE_THRESHOLD, shingles

NUM_PERM = 128
SEED = 1
SCHEME = "affine32"  # uint32 hash values: 4 bytes a permutation
THRESHOLD = NEAR_DUPLICATE_THRESHOLD
RECALL_WEIGHTS = (0.05, 0.95)  # (false positive, false negative) weights of the optimizer

_BANDING = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, weights=RECALL_WEIGHTS)
BANDS, ROWS = _BANDING.b, _BANDING.r
_PERMUTATIONS = MinHash(num_perm=NUM_PERM, seed=SEED, scheme=SCHEME).permutations  # made once, shared


def signature(text: str) -> LeanMinHash | None:
    """The text's MinHash, or None for a text without words (nothing to compare)."""
    tokens = shingles(text)
    if not tokens:
        return None
    minhash = MinHash(num_perm=NUM_PERM, seed=SEED, permutations=_PERMUTATIONS, scheme=SCHEME)
    minhash.update_batch([" ".join(token).encode() for token in tokens])
    return LeanMinHash(minhash)


def signature_bytes(minhash: LeanMinHash) -> bytes:
    buffer = bytearray(minhash.bytesize())
    minhash.serialize(buffer)
    return bytes(buffer)


def signature_load(data) -> LeanMinHash:
    return LeanMinHash.deserialize(bytes(data))


def band_keys(corpus: str, minhash: LeanMinHash) -> list[int]:
    """One signed 64-bit key per band: items of `corpus` sharing any key are candidates."""
    keys = []
    for band in range(BANDS):
        digest = hashlib.blake2b(digest_size=8)
        digest.update(f"{corpus}:{band}:".encode())
        digest.update(minhash.hashvalues[band * ROWS : (band + 1) * ROWS].tobytes())
        keys.append(int.from_bytes(digest.digest(), "big", signed=True))
    return keys


def similarity(a: LeanMinHash, b: LeanMinHash) -> float:
    """The estimated Jaccard similarity of the two texts' shingle sets."""
    return a.jaccard(b)
