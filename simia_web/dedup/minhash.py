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

import functools
import hashlib

import numpy as np
from datasketch import MinHash, MinHashLSH

from simia_web.formats.rules import NEAR_DUPLICATE_THRESHOLD, shingles

NUM_PERM = 128
SEED = 1
SCHEME = "affine32"  # uint32 hash values: 4 bytes a permutation
THRESHOLD = NEAR_DUPLICATE_THRESHOLD
RECALL_WEIGHTS = (0.05, 0.95)  # (false positive, false negative) weights of the optimizer

_BANDING = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, weights=RECALL_WEIGHTS)
BANDS, ROWS = _BANDING.b, _BANDING.r
_PERMUTATIONS = MinHash(num_perm=NUM_PERM, seed=SEED, scheme=SCHEME).permutations  # made once, shared
# A signature is its hash values and nothing else (seed, scheme and size are the constants above), stored as
# little-endian uint32: reading one back is a view on the bytes, where a datasketch LeanMinHash would be parsed
# value by value, and a write compares a new text with several stored signatures.
_STORED = np.dtype("<u4")
SIGNATURE_BYTES = NUM_PERM * _STORED.itemsize


def signature(text: str) -> np.ndarray | None:
    """The text's MinHash values (one per permutation), or None for a text without words (nothing to compare)."""
    tokens = shingles(text)
    if not tokens:
        return None
    minhash = MinHash(num_perm=NUM_PERM, seed=SEED, permutations=_PERMUTATIONS, scheme=SCHEME)
    minhash.update_batch([" ".join(token).encode() for token in tokens])
    return minhash.hashvalues.astype(_STORED)


def signature_bytes(values: np.ndarray) -> bytes:
    return values.astype(_STORED, copy=False).tobytes()


def signature_load(data) -> np.ndarray:
    if len(data) != SIGNATURE_BYTES:
        raise ValueError(f"a stored signature holds {SIGNATURE_BYTES} bytes, not {len(data)}")
    return np.frombuffer(data, dtype=_STORED)


def band_keys(corpus: str, workspace_id: int, values: np.ndarray) -> list[int]:
    """One signed 64-bit key per band: items of `corpus` in the workspace `workspace_id` sharing any key are
    candidates. The workspace is hashed into the key, so an item never meets another workspace's items."""
    raw = memoryview(signature_bytes(values))
    width = ROWS * _STORED.itemsize
    keys = []
    for band, prefix in enumerate(_band_prefixes(corpus, workspace_id)):
        digest = prefix.copy()
        digest.update(raw[band * width : (band + 1) * width])
        keys.append(int.from_bytes(digest.digest(), "big", signed=True))
    return keys


@functools.lru_cache(maxsize=256)
def _band_prefixes(corpus: str, workspace_id: int) -> tuple:
    """Each band's hash with its "corpus:workspace:band:" prefix taken in, copied for every key: the same digest as
    hashing prefix and values together, at two thirds of the CPU (an index build makes 16 keys an item)."""
    return tuple(hashlib.blake2b(f"{corpus}:{workspace_id}:{band}:".encode(), digest_size=8) for band in range(BANDS))


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The estimated Jaccard similarity of the two texts' shingle sets: the share of permutations whose minimum
    hash value they share (datasketch's MinHash.jaccard)."""
    return np.count_nonzero(a == b) / NUM_PERM
