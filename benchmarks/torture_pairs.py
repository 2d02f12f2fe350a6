"""Racing resume/cancel pairs through our own API (benchmarks/torture.py `--pairs`): two
`artifactflow serve` processes on the same data; a message is paused, then a resume and a
cancel are sent at the same instant (threads released by a barrier), each to a random one of
the two servers."""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import threading
import time
import uuid
from typing import Any

import httpx
from killable_serve import free_port
from torture_world import ARTIFACTFLOW, Tally, World


@contextlib.contextmanager
def servers(w: World, count: int = 2) -> Any:
    procs, urls = [], []
    for _ in range(count):
        port = free_port()
        procs.append(
            subprocess.Popen(
                [
                    ARTIFACTFLOW,
                    "--config-dir",
                    str(w.config),
                    "--data-dir",
                    str(w.data),
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env=w.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        urls.append(f"http://127.0.0.1:{port}/api/v1")
    try:
        for url in urls:
            for _ in range(600):
                try:
                    if httpx.get(url + "/conversations", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        yield urls
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_status(
    client: httpx.Client, url: str, mid: str, statuses: set[str], timeout: float = 15
) -> str:
    status = "?"
    for _ in range(int(timeout / 0.05)):
        status = client.get(f"{url}/messages/{mid}").json().get("status", "?")
        if status in statuses:
            return status
        time.sleep(0.05)
    return status


def pair_trial(
    w: World, urls: list[str], rng: random.Random, tally: Tally
) -> tuple[str, dict[str, Any]]:
    token = "T" + uuid.uuid4().hex[:10]
    with httpx.Client(timeout=30) as client:
        chat = client.post(f"{urls[0]}/chat", json={"content": f"task {token}"})
        if chat.status_code >= 500:
            tally.errors_5xx += 1
        mid = chat.json()["message_id"]
        if wait_status(client, urls[0], mid, {"waiting", "failed", "completed"}) != "waiting":
            tally.note(f"{mid[:8]}: never paused")
            return mid, {}
        barrier = threading.Barrier(2)
        answers: dict[str, httpx.Response | Exception] = {}
        latency: list[float] = []
        resume_url, cancel_url = rng.choice(urls), rng.choice(urls)

        def send(kind: str) -> None:
            with httpx.Client(timeout=30) as own:
                barrier.wait()
                try:
                    if kind == "resume":
                        answers[kind] = own.post(
                            f"{resume_url}/chat/{mid}/resume", json={"decisions": "approve"}
                        )
                    else:
                        began = time.perf_counter()
                        answers[kind] = own.post(f"{cancel_url}/chat/{mid}/cancel")
                        latency.append(time.perf_counter() - began)
                except Exception as exc:  # noqa: BLE001 - counted below
                    answers[kind] = exc

        threads = [threading.Thread(target=send, args=(k,)) for k in ("resume", "cancel")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        final = wait_status(client, urls[0], mid, {"completed", "failed", "cancelled", "waiting"})
        info = {"token": token, "final": final, "same_server": resume_url == cancel_url}
        if latency:
            tally.cancel_seconds.append(latency[0])
        for kind, answer in answers.items():
            if isinstance(answer, Exception):
                info[kind] = repr(answer)
                continue
            info[kind] = answer.status_code
            if answer.status_code >= 500:
                tally.errors_5xx += 1
                tally.note(f"{mid[:8]}: {kind} answered {answer.status_code}: {answer.text[:120]}")
            if kind == "cancel" and answer.status_code == 200:
                info["cancelled"] = answer.json().get("cancelled")
                info["cancel_status"] = answer.json().get("status")
        return mid, info


async def judge_pair(w: World, mid: str, info: dict[str, Any], tally: Tally) -> None:
    tally.trials += 1
    message = await w.client.admin.store.get_message(mid)
    if message is None or not info:
        tally.wrong += 1
        return
    good = await w.check_log(message, tally, one_pause=True)
    status = message["status"]
    ran = w.journal_count(info["token"]) > 0
    if info.get("cancel") == 409:
        tally.refused += 1
    elif info.get("cancelled") is True:
        tally.accepted += 1
        if status != "cancelled":
            tally.dropped += 1
        elif ran:
            tally.tool_after_cancel += 1
    elif info.get("cancel") == 200 and info.get("resume") == 202:
        tally.dropped += 1  # the run was live, the cancel neither took effect nor said why not
        tally.note(
            f"{mid[:8]}: cancel answered {info.get('cancel_status')!r}, not cancelled, no conflict"
        )
    if info.get("cancelled") is True and status != "cancelled":
        good = False
        tally.note(f"{mid[:8]}: cancel said cancelled, message ended {status} ({info})")
    elif info.get("cancelled") is not True and info.get("resume") == 202 and status != "completed":
        good = False
        tally.note(f"{mid[:8]}: resumed, message ended {status} ({info})")
    elif info.get("cancelled") is not True and info.get("resume") != 202:
        good = False
        tally.note(f"{mid[:8]}: neither resume nor cancel won ({info})")
    if w.journal_count(info["token"]) > 1:
        tally.duplicates += 1
    if not good:
        tally.wrong += 1
