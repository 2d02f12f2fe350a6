"""Run a command with CPU-burning processes beside it: the busy machine the suite must hold on.

`python scripts/with_cpu_load.py 2 -- make test` starts two processes that spin on pure
Python arithmetic (each keeps one core busy, as another user's build would), runs the command,
stops the burners whatever happens, prints the command's wall time, and exits with its code.
`make test-loaded` runs the whole suite this way, with `PYTHONDONTWRITEBYTECODE=1` as well.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time


def _burn() -> None:  # pragma: no cover - runs in the burner processes
    x = 0
    while True:
        x = (x * 1_103_515_245 + 12_345) % 2_147_483_648


def main(argv: list[str]) -> int:
    if len(argv) < 3 or "--" not in argv:
        print("usage: with_cpu_load.py N -- COMMAND ...", file=sys.stderr)
        return 2
    split = argv.index("--")
    count = int(argv[1])
    command = argv[split + 1 :]
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(count)]
    for burner in burners:
        burner.start()
    print(f"with_cpu_load: {count} CPU burners running beside: {' '.join(command)}", flush=True)
    started = time.monotonic()
    try:
        code = subprocess.call(command)
    finally:
        for burner in burners:
            burner.terminate()
        for burner in burners:
            burner.join()
    minutes = (time.monotonic() - started) / 60
    print(f"with_cpu_load: exit {code} after {minutes:.1f} min with {count} burners", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
