"""The first hour, measured: the command line's start-up against a baseline revision, and the
run-time install's size and time.

    python benchmarks/first_hour.py                      # start-up: this tree vs HEAD~N (--baseline)
    python benchmarks/first_hour.py --baseline 1d7928c --repeats 15
    python benchmarks/first_hour.py --install            # also: a fresh venv with `pip install -e .`

Start-up: each command runs in a fresh interpreter of this venv, once on this tree and once on
the baseline (`git archive REV` unpacked in a temporary folder and put first on `PYTHONPATH`,
so the same libraries serve both), interleaved, `--repeats` times after one warm-up each (so
bytecode is cached). The figures are the child's CPU seconds (user + system, the operating
system's accounting) and wall seconds; the ratio is the median of per-pair ratios. Every run's
exit code is checked, and `run` without a key must leave no file in the data folder on this
tree (the baseline's files are counted, not asserted).

Install: `make setup VENV=<a new temporary folder>` (the run-time dependencies only; pip's
cache is whatever the machine has: say so when quoting), its size on disk (`du`), then a task
through the new venv's `artifactflow run` against the scripted model server (asserting it
answered), then the size again, with the bytecode of what the run imported.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _baseline(rev: str, into: Path) -> Path:
    """The package of `rev`, importable as `artifactflow` from the returned folder."""
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    pkg = into / "pkg"
    pkg.mkdir()
    (pkg / "artifactflow").symlink_to(tree / "src")
    (tree / "src" / "default_config").symlink_to(tree / "config")
    return pkg


def _env(pythonpath: Path | None, data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARTIFACTFLOW_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode is written, and cached after the warm-up
    env.update(NO_COLOR="1", ARTIFACTFLOW_DATA_DIR=str(data), **extra)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    else:
        env.pop("PYTHONPATH", None)
    return env


def _timed(args: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """(exit code, CPU seconds, wall seconds) of one child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, stdin=subprocess.DEVNULL, capture_output=True, cwd=ROOT / "benchmarks")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, cpu, wall


# (label, arguments, exit code on this tree, on the baseline: None when it may differ)
COMMANDS: list[tuple[str, list[str], int, int | None]] = [
    ("--help", ["--help"], 0, 0),
    ("--version", ["--version"], 0, None),  # the baseline has none: a usage error
    ("conversations", ["conversations"], 0, 0),
    ("run (no key)", ["run", "hello"], 2, 2),
    ("resume (unknown id)", ["resume", "0" * 32, "--approve"], 2, 2),
]


def startup(rev: str, repeats: int) -> None:
    launcher = "import sys; from artifactflow.cli.main import main; sys.exit(main())"
    with tempfile.TemporaryDirectory() as tmp:
        base_pkg = _baseline(rev, Path(tmp))
        print(f"start-up: this tree vs {rev}; {repeats} interleaved pairs after a warm-up; "
              "CPU = user + system of the child")
        print(f"{'command':22} {'now cpu':>8} {'base cpu':>9} {'ratio':>6} {'now wall':>9} {'base wall':>10}")
        for label, args, expected, base_expected in COMMANDS:
            rows: dict[str, list[tuple[float, float]]] = {"now": [], "base": []}
            for i in range(repeats + 1):
                for side, path in (("now", None), ("base", base_pkg)):
                    data = Path(tmp) / f"data-{side}-{label.split()[0]}-{i}"
                    if label == "conversations":  # a store that exists: the listing path
                        data = Path(tmp) / f"store-{side}"
                    key = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"} if label.startswith("resume") else {}
                    code, cpu, wall = _timed([PY, "-c", launcher, *args], _env(path, data, **key))
                    want = expected if side == "now" else base_expected
                    assert want is None or code == want, (label, side, code)
                    if label.startswith("run") and side == "now":
                        assert not data.exists() or not any(data.iterdir()), "run without a key created files"
                    if i:
                        rows[side].append((cpu, wall))
            now_cpu = statistics.median(c for c, _ in rows["now"])
            base_cpu = statistics.median(c for c, _ in rows["base"])
            ratio = statistics.median(n[0] / b[0] for n, b in zip(rows["now"], rows["base"], strict=True))
            now_wall = statistics.median(w for _, w in rows["now"])
            base_wall = statistics.median(w for _, w in rows["base"])
            print(f"{label:22} {now_cpu:8.3f} {base_cpu:9.3f} {ratio:6.2f} {now_wall:9.3f} {base_wall:10.3f}")
        left = sorted(p.name for p in Path(tmp).glob("data-base-run-*/*"))
        print(f"baseline `run` without a key left: {', '.join(sorted(set(left))) or 'nothing'}")


def install() -> None:
    from artifactflow.testing import ScriptedLLM, Text

    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        start = time.perf_counter()  # exactly what `make setup` does, into a venv of its own
        subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "setup", f"VENV={venv}"],
                       check=True, capture_output=True)
        seconds = time.perf_counter() - start
        installed = int(subprocess.run(["du", "-sm", str(venv)], capture_output=True, text=True,
                                       check=True).stdout.split()[0])
        with ScriptedLLM() as llm:
            llm.script(Text("installed and answering"))
            env = _env(None, Path(tmp) / "data", OPENAI_API_KEY="k", OPENAI_BASE_URL=llm.base_url)
            proc = subprocess.run(
                [str(venv / "bin" / "artifactflow"), "run", "hello", "--json"],
                env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
            )
            assert proc.returncode == 0, proc.stderr
            assert llm.request_count == 1 and "installed and answering" in proc.stdout
        size = subprocess.run(["du", "-sm", str(venv)], capture_output=True, text=True, check=True)
        megabytes = int(size.stdout.split()[0])
        site = next((venv / "lib").glob("python3*/site-packages"))
        top = subprocess.run(["du", "-sm", *map(str, site.iterdir())], capture_output=True, text=True)
        biggest = sorted((int(n), Path(p).name) for n, p in (line.split("\t") for line in top.stdout.splitlines()))[-8:]
        print(f"run-time install (`make setup`): {seconds:.0f} s (pip cache as the machine has "
              f"it), {installed} MB on disk, {megabytes} MB after one run (its bytecode)")
        print("largest: " + ", ".join(f"{name} {mb} MB" for mb, name in reversed(biggest)))
        shutil.rmtree(venv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="1d7928c", help="git revision to compare with")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--install", action="store_true", help="also measure a fresh install")
    parser.add_argument("--no-startup", action="store_true")
    args = parser.parse_args()
    if not args.no_startup:
        startup(args.baseline, args.repeats)
    if args.install:
        install()


if __name__ == "__main__":
    main()
