"""Cost of an approximate `update_artifact` edit: `find_closest` on documents of growing size.

Each case quotes a stretch of the document with small typos and reports the time of one
search (median of --repeat runs), the similarity of what came back, and that of the quoted
stretch itself: a good search returns the stretch, or something at least as similar. The prose
is words from a ten-word vocabulary, the hardest case for alignment (everything looks alike).

Run: `python benchmarks/fuzzy_edit.py [--repeat 3]`
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from artifactflow.artifacts import find_closest, similarity

CASES = [  # (document characters, quotation characters)
    (10_000, 40),
    (100_000, 40),
    (100_000, 600),
    (100_000, 2_000),
    (100_000, 10_000),
    (1_000_000, 600),
]


def document(size: int, rng: random.Random) -> str:
    words = "one two three four five six seven eight nine ten".split()
    lines = []
    while sum(map(len, lines)) < size:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + "\n")
    return "".join(lines)[:size]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(11)
    print(f"{'document':>10} {'quote':>7} {'ms':>9} {'found':>6} {'quoted':>6}  same stretch")
    for size, quote in CASES:
        content = document(size, rng)
        start = content.index(" ", size // 2) + 1
        stretch = content[start : start + quote]
        target = stretch.replace("three", "thre").replace("seven", "sevne")
        times, found = [], None
        for _ in range(args.repeat):
            began = time.perf_counter()
            found = find_closest(content, target)
            times.append(time.perf_counter() - began)
        if not found or found[0].similarity < similarity(stretch, target) - 1e-9:
            raise AssertionError(f"{size}/{quote}: the search found a worse match than the quote")
        same = (found[0].start, found[0].text) == (start, stretch)
        print(
            f"{size:>10} {quote:>7} {statistics.median(times) * 1000:>9.1f} "
            f"{found[0].similarity:>6.3f} {similarity(stretch, target):>6.3f}  {same}"
        )


if __name__ == "__main__":
    main()
