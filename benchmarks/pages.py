"""The tool payload the benchmarks share: page `n` is `PAYLOAD_BYTES` of word-like text,
the same for every script and peer (compressible like real pages, but not trivially)."""

from __future__ import annotations

import random
import string

PAYLOAD_BYTES = 4096
WORDS = [
    "".join(random.Random(i).choices(string.ascii_lowercase, k=random.Random(i).randint(2, 9)))
    for i in range(2000)
]


def page(n: int) -> str:
    """Page `n`: exactly `PAYLOAD_BYTES` characters (ASCII), deterministic in `n`."""
    rng = random.Random(n)
    out: list[str] = []
    size = 0
    while size < PAYLOAD_BYTES:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:PAYLOAD_BYTES]
