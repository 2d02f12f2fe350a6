"""Answer a paused message from a second process, as a restarted or surviving worker would.

`RESUMER` is the script (run with ``python -c RESUMER CONFIG DATA MESSAGE_ID``): it opens
its own client, approves the pending calls and prints one JSON line with the result's
status, response, pending call ids and event types. `resume_elsewhere` runs it to the end, in
a process forked from the tests' CLI fork server (tests/cli_fork.py: the imports done once);
tests that kill it midway start it themselves.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

from cli_fork import fork_python
from waiting import ceiling

RESUMER = textwrap.dedent(
    """
    import asyncio, json, sys
    from artifactflow import Client, Resume, load_settings

    async def main():
        config, data, mid = sys.argv[1:4]
        client = await Client.open(load_settings(config, data))
        try:
            result = await client.run(Resume(mid, "approve"))
            print(json.dumps({"status": result.status, "response": result.response,
                              "calls": [c["tool_call_id"] for c in result.pending_calls or []],
                              "types": [e.type for e in result.events]}))
        finally:
            await client.aclose()

    asyncio.run(main())
    """
)


def resume_elsewhere(
    config: Path, data: Path, mid: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Resume `mid` with approval in a new process; its printed result (stderr under "stderr")."""
    out = fork_python(  # forked from the tests' CLI fork server (tests/cli_fork.py)
        RESUMER, [str(config), str(data), mid], env or dict(os.environ), ceiling(300)
    )
    assert out.returncode == 0, out.stderr
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "stderr": out.stderr}
