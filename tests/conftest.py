"""Shared fixtures: a scripted OpenAI-compatible server, and clients (or the old controllers)
on temp folders.

Every test gets its own config folder (agents written by the test) and data folder, and talks
to the scripted server over real HTTP with the real `openai` client.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

# pytest's rewritten test modules (and the modules of its plugins' packages) are cached as
# bytecode only where Python may write bytecode. With `PYTHONDONTWRITEBYTECODE=1` (set in some
# environments, and by `make test-loaded`) every test process rewrote and compiled them all
# again at each start: ~5 CPU seconds in each of the suite's seven processes (issue 37). This
# process writes them; the processes the tests start keep the variable as it is set.
sys.dont_write_bytecode = False

# One OpenBLAS thread in the test processes and every process they start (set before numpy
# loads). The suite runs six workers on two cores; OpenBLAS otherwise spreads each small
# matmul (a memory search's cosine over a few thousand rows) over a thread per core, whose
# spin-waits burn CPU the other workers need: tests/test_memory_no_loss.py took 47 CPU
# seconds with them, 37 without (issue 37). The results are the same; a caller that sets
# its own value keeps it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from scripted_llm import ScriptedLLM  # noqa: E402

from artifactflow import Client, load_settings  # noqa: E402


def _patient_http_defaults() -> None:
    """Every HTTP client the tests make without a timeout of its own waits as long as this
    machine needs.

    httpx's default is 5 s per request. On a busy two-core machine a local server can take
    longer than that to answer one request (seen: `POST /threads` timing out under a load of
    15), so a test would fail for the machine's speed, not for the code's. The defaults of
    the client constructors and the module-level shortcuts become a ceiling scaled by the
    machine's measured slowness (`waiting.ceiling`); a timeout a test or the product passes
    explicitly is kept as it is."""
    import httpx
    from waiting import ceiling

    patient = httpx.Timeout(ceiling(120.0), connect=ceiling(60.0))
    for function in (
        httpx.Client.__init__,
        httpx.AsyncClient.__init__,
        httpx.request,
        httpx.get,
        httpx.options,
        httpx.head,
        httpx.post,
        httpx.put,
        httpx.patch,
        httpx.delete,
    ):
        defaults = function.__kwdefaults__
        if defaults is not None and isinstance(defaults.get("timeout"), httpx.Timeout):
            defaults["timeout"] = patient


_patient_http_defaults()


def _xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`make test`), one CLI fork server (tests/cli_fork.py) for all the
    workers, started by the controller before them: each worker started its own, importing
    the run path again (~3.5 CPU seconds each, issue 37)."""
    if _xdist_controller(config):
        import cli_fork

        _compile_source()  # before the server imports it
        cli_fork.start_shared()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _xdist_controller(config):
        import cli_fork

        cli_fork.stop_shared()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package's bytecode once before any test starts a subprocess.

    With `PYTHONDONTWRITEBYTECODE=1` (set in some environments) an editable checkout never
    caches its bytecode, so every CLI or server subprocess would compile every module it
    imports again (seconds each on a busy machine). `compileall` writes the cache whatever
    that variable says; the subprocesses still read it."""
    _compile_source()


def _compile_source() -> None:
    import compileall

    source = Path(__file__).resolve().parent.parent / "src"
    compileall.compile_dir(str(source), quiet=2, workers=1)


@pytest.fixture(scope="session", autouse=True)
def reaper() -> Iterator[None]:
    """Ends the processes this test run started and left running (tests/reaper.py)."""
    import reaper as procs

    token = procs.mark()
    yield
    fork_server = sys.modules.get("cli_fork")  # tests/cli_fork.py's server, if one started
    if fork_server is not None:
        fork_server.stop()
    left = procs.reap(token)
    if left:
        print(f"\nreaper: ended {len(left)} process(es) the tests left running: {left}")


@pytest.fixture(autouse=True)
def user_data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test that configures no data folder (nor a subprocess it starts) writes to a fresh
    user data folder (`XDG_DATA_HOME`, read by platformdirs), never the real one; the same for
    the user cache folder (`XDG_CACHE_HOME`: the command line's remembered settings)."""
    home = tmp_path_factory.mktemp("user-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))
    return home


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file the plugin tools of a test append to (``AF_JOURNAL``): their side effects."""
    path = tmp_path / "journal.txt"
    monkeypatch.setenv("AF_JOURNAL", str(path))
    return path


@pytest.fixture
def llm_env(llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> ScriptedLLM:
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    for name in list(__import__("os").environ):
        if name.startswith("ARTIFACTFLOW_"):
            monkeypatch.delenv(name, raising=False)
    return llm


def write_agent(folder: Path, name: str, *, role: str = "subagent", tools: list[str] | None = None,
                prompt: str | None = None, max_tool_rounds: int = 10, description: str = "",
                extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tool_list = ", ".join(tools or [])
    body = prompt or f"You are {name}."
    (folder / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: {description or name}\nrole: {role}\n"
        f"tools: [{tool_list}]\nmax_tool_rounds: {max_tool_rounds}\n{extra}---\n{body}\n",
        encoding="utf-8",
    )


def make_config(
    root: Path,
    *,
    lead_tools: list[str] | None = None,
    subagents: dict[str, list[str]] | None = None,
    max_tool_rounds: int = 10,
    yaml_text: str = "",
    plugin_files: dict[str, str] | None = None,
) -> Path:
    config = root / "config"
    agents = config / "agents"
    write_agent(agents, "lead_agent", role="lead", tools=lead_tools or [],
                prompt="You are the lead agent.", max_tool_rounds=max_tool_rounds)
    for name, tools in (subagents or {}).items():
        write_agent(agents, name, tools=tools, description=f"{name} does research",
                    prompt=f"You are {name}, a subagent.")
    base = "llm:\n  max_retries: 2\n  backoff_base: 0.01\n  backoff_max: 0.05\n"
    (config / "artifactflow.yaml").write_text(base + textwrap.dedent(yaml_text), encoding="utf-8")
    for filename, source in (plugin_files or {}).items():
        (config / filename).write_text(textwrap.dedent(source), encoding="utf-8")
    return config


ClientFactory = Callable[..., Any]


def _opener(tmp_path: Path, opened: list[Client]) -> Callable[..., Any]:
    """A factory opening a `Client` on a config written by
    `make_config(**config_kwargs)` (or `config_dir`) and `data_dir` (default: tmp/data); what
    it opened is closed at teardown. Two opened on one data folder are two processes' worth."""

    async def factory(config_dir: Path | None = None, data_dir: Path | None = None,
                      extra_tools: list[Any] | None = None, **config_kwargs: Any) -> Any:
        if config_dir is None:
            config_dir = make_config(tmp_path, **config_kwargs)
        settings = load_settings(config_dir, data_dir or tmp_path / "data")
        opened.append(await Client.open(settings, extra_tools=extra_tools))
        return opened[-1]

    return factory


@pytest_asyncio.fixture
async def make_client(tmp_path: Path, llm_env: ScriptedLLM) -> AsyncIterator[ClientFactory]:
    opened: list[Client] = []
    yield _opener(tmp_path, opened)
    for client in opened:
        await client.aclose()


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """An app store on each backend: a SQLite file, then a fresh PostgreSQL database."""
    from pg import fresh_database

    from artifactflow.core.store.repository import AppStore

    if request.param == "sqlite":
        s = await AppStore.open(None, sqlite_path=tmp_path / "app.db")
        try:
            yield s
        finally:
            await s.close()
    else:
        async with fresh_database() as url:
            s = await AppStore.open(url)
            try:
                yield s
            finally:
                await s.close()


# `make check` runs the files listed in unit_tests.txt, chosen by measured time (each runs in
# a few seconds, with no PostgreSQL or browser); their tests carry the `unit` marker.
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist load` (`make test`): tests are handed to the workers one by one, so the long
    files (the CLI's, the kill tests) spread over every worker instead of queueing on one,
    except the files with a module- or class-scoped fixture (a server cluster, a fuzzed app),
    which go to one worker whole so that fixture is built once. Other `--dist` modes are
    xdist's own.

    (xdist's `loadgroup` would do this with `xdist_group` marks, but with pytest 9 its renaming
    of node ids has no effect, so the groups are ignored.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = Path(str(config.rootpath))

    class TestsApartSharedFixturesWhole(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if _has_shared_fixture(root / path) else nodeid

    return TestsApartSharedFixturesWhole(config, log)


@functools.cache
def _has_shared_fixture(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return re.search(r"scope=[\"'](module|class|package)[\"']", text) is not None


UNIT_FILES = frozenset(
    Path(line).name
    for line in (Path(__file__).parent / "unit_tests.txt").read_text(encoding="utf-8").split()
)


SLOW_FIRST = {
    name: rank
    for rank, name in enumerate(
        line.strip()
        for line in (Path(__file__).parent / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    )
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in UNIT_FILES:
            item.add_marker(pytest.mark.unit)
    # the longest tests first (tests/slow_tests.txt), the rest in their usual order: the
    # workers take tests in this order, and a long test begun last would be the run's tail
    items.sort(key=lambda item: SLOW_FIRST.get(item.nodeid.split("[", 1)[0], len(SLOW_FIRST)))
