"""A run's `webhook`: when the run ends (success, error, interrupted, or paused for approval,
which the protocol reports as success with the thread `interrupted`), POST the run to the URL.

- Checked when the run is asked for: an http(s) URL, and the SSRF rules of `web_fetch`
  (loopback, private and link-local targets refused unless `webhooks.allow_private: true`).
  A refused URL is a 422 and nothing is started.
- Delivered once per run end: the run's delivery row is claimed with a compare-and-set
  (`sending` from `pending`), so two workers settling the same run never both send it. At
  most once: a process that dies while sending leaves the row `sending`, not sent again.
  A run whose worker died before it ended is settled by whichever worker reads it next, or
  by every server's settling loop (`loops.py`), and its webhook is sent from there.
- Off the run's path: the delivery is a task of its own with a timeout per attempt and retries
  with doubling backoff; a failing receiver is logged and recorded, never raised into the run.
- With `webhooks.secret`, `X-Artifactflow-Signature: sha256=<hex HMAC-SHA256 of the body>`.
- Every attempt (time, HTTP status or error) is kept on the row: `GET
  /threads/{thread_id}/runs/{run_id}/webhook` shows them.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import httpx
import sqlalchemy as sa

from ..core.store.schema import webhook_deliveries as table
from ..errors import UserError
from ..tools.web.ssrf import BlockedAddressError, check_url

if TYPE_CHECKING:
    from ..client import Client
    from ..core.store.repository import AppStore
    from ..settings.platform import WebhookSettings

log = logging.getLogger("artifactflow.webhooks")
SIGNATURE_HEADER = "X-Artifactflow-Signature"


async def check(settings: WebhookSettings, url: Any) -> str | None:
    """The run's webhook URL, checked (None: no webhook); a `UserError` when it is refused."""
    if url is None or url == "":
        return None
    if not isinstance(url, str):
        raise UserError("webhook must be a URL string")
    try:
        await check_url(url, allow_private_networks=settings.allow_private)
    except BlockedAddressError as exc:
        raise UserError(
            f"webhook {exc}".replace("(web.allow_private_networks)", "(webhooks.allow_private)")
        ) from None
    return url


async def register(store: AppStore, run_id: str, url: str) -> None:
    """The run has a webhook: a `pending` delivery row, sent when the run ends."""
    now = time.time()
    await store.insert_once(
        table.insert().values(
            run_id=run_id, url=url, status="pending", attempts="[]", created_at=now, updated_at=now
        )
    )


async def delivery(store: AppStore, run_id: str) -> dict[str, Any] | None:
    rows = await store.fetch_rows(sa.select(table).where(table.c.run_id == run_id))
    if not rows:
        return None
    row = dict(rows[0])
    row["attempts"] = json.loads(row["attempts"])
    return row


async def send(client: Client, run: dict[str, Any]) -> None:
    """The ended run's webhook, if it has one (`run`: its protocol view). Never raises: a
    webhook takes neither the run nor the server down."""
    try:
        await deliver(client.admin.store, client.settings.webhooks, run["run_id"], run)
    except Exception:
        log.exception("webhook of protocol run %s", run["run_id"])


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def deliver(
    store: AppStore, settings: WebhookSettings, run_id: str, payload: dict[str, Any]
) -> str | None:
    """Send the run's webhook if it has one and nobody claimed it yet; the final delivery
    status (None: nothing to send here). Never raises for the receiver's faults."""
    claimed = await store.write(
        table.update()
        .where(table.c.run_id == run_id, table.c.status == "pending")
        .values(status="sending", updated_at=time.time())
    )
    if claimed != 1:
        return None
    row = await delivery(store, run_id)
    assert row is not None
    body = json.dumps(payload, default=str).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "artifactflow-webhook"}
    if settings.secret:
        headers[SIGNATURE_HEADER] = signature(settings.secret, body)
    attempts: list[dict[str, Any]] = []
    status = "failed"
    try:
        await check_url(row["url"], allow_private_networks=settings.allow_private)
    except BlockedAddressError as exc:  # DNS changed since the run was asked for
        attempts.append({"at": time.time(), "status_code": None, "error": str(exc)})
        status = "refused"
    else:
        async with httpx.AsyncClient(timeout=settings.timeout_seconds) as http:
            for attempt in range(settings.max_attempts):
                if attempt:
                    await asyncio.sleep(settings.backoff_seconds * 2 ** (attempt - 1))
                record: dict[str, Any] = {"at": time.time(), "status_code": None, "error": None}
                try:
                    response = await http.post(row["url"], content=body, headers=headers)
                    record["status_code"] = response.status_code
                    ok = response.is_success
                    if not ok:
                        record["error"] = f"HTTP {response.status_code}"
                except httpx.HTTPError as exc:
                    record["error"] = f"{type(exc).__name__}: {exc}"
                    ok = False
                attempts.append(record)
                await _record(store, run_id, "sending", attempts)
                if ok:
                    status = "delivered"
                    break
                log.warning("webhook of run %s: attempt %d failed: %s", run_id, attempt + 1, record["error"])
    await _record(store, run_id, status, attempts)
    return status


async def _record(store: AppStore, run_id: str, status: str, attempts: list[dict[str, Any]]) -> None:
    await store.write(
        table.update()
        .where(table.c.run_id == run_id)
        .values(status=status, attempts=json.dumps(attempts), updated_at=time.time())
    )
