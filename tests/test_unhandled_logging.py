"""An unhandled error in the HTTP layer is logged with its type and traceback, with or without
`--debug` (issue 34).

Repro: a 500 logged only "unhandled error in POST /threads": the command line's log format
drops tracebacks unless `--debug`, so the one record that explains a bug said nothing. The
record now carries the exception's type and text, and the format keeps the traceback of an
`unhandled` record always (other records stay one line).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from artifactflow.api.errors import CatchAllMiddleware
from artifactflow.cli.main import _LogFormatter


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_LogFormatter("%(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


async def _broken(scope: Any, receive: Any, send: Any) -> None:
    raise KeyError("thread_metadata")


async def test_a_500_logs_type_and_traceback_without_debug() -> None:
    capture = _Capture()
    logger = logging.getLogger("artifactflow")
    logger.addHandler(capture)
    try:
        transport = httpx.ASGITransport(app=CatchAllMiddleware(_broken))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            answer = await http.post("/threads", json={})
        assert answer.status_code == 500
        assert "see the server log" in answer.json()["error"]["message"]
    finally:
        logger.removeHandler(capture)
    (line,) = [x for x in capture.lines if "unhandled error" in x]
    assert line.startswith("error: unhandled error in POST /threads: KeyError: 'thread_metadata'"), line
    assert "Traceback (most recent call last)" in line and "_broken" in line, line
    # an ordinary warning stays one line
    record = logging.LogRecord("artifactflow", logging.WARNING, __file__, 1, "plain", None, None)
    assert capture.format(record) == "warning: plain"
