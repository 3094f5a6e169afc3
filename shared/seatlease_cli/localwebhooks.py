"""The local stack's webhooks (issue 51): what ``seatlease local`` adds so that a receiver on
the developer's machine hears the demo tenant's events as a customer's would in the cloud.

- The environment of the stack's processes: ``SEATLEASE_LOCAL=1`` (an endpoint may be
  ``http://127.0.0.1:PORT/...``: ``seatlease.webhooks.urls.local_stack``),
  ``WEBHOOK_RETRY_FIRST_SECONDS=1`` (the retry schedule starts at a second, not the
  cloud's 30, as the local refusal judging starts at a minute: a receiver answering 500
  twice gets its third attempt in seconds), ``ALERT_SETTLE_SECONDS=10`` (the emulator's
  push reaches the audit in about a second, not the minute the cloud's Pub/Sub may take)
  and ``WEBHOOK_KEY``, which seals the endpoints' secrets. The key is made once into
  ``.seatlease/webhook-key`` (0600) and used again by every later start: a new key would
  leave every stored secret unreadable. Each is only a default: the environment wins.
- A second push subscription, ``<topic>-webhooks``, to the served ``webhooks`` function
  (the first goes to ``audit``); without the emulator the reaper's in-process push goes to
  both (``localstack.AuditPush``).
- Cloud Scheduler's retry job: a loop POSTing ``/webhooks_retry`` every
  ``RETRY_INTERVAL`` seconds (the cloud's is every minute), which sends what is due and
  computes the alerts.
"""

from __future__ import annotations

import os
import threading
import urllib.request
from pathlib import Path
from typing import Any

KEY_FILE_NAME = "webhook-key"
# Seconds between the local scheduler's POSTs of /webhooks_retry.
RETRY_INTERVAL = 1.5
LOCAL_DEFAULTS = {
    "SEATLEASE_LOCAL": "1",
    "WEBHOOK_RETRY_FIRST_SECONDS": "1",
    "ALERT_SETTLE_SECONDS": "10",
}


def prepare_environment(state_dir: Path) -> Path | None:
    """Set the local defaults and ``WEBHOOK_KEY`` (from ``state_dir``'s key file, made on
    the first start). Returns the key file when the key is the stack's own."""
    for name, value in LOCAL_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if os.environ.get("WEBHOOK_KEY", "").strip():
        return None
    from seatlease.webhooks.crypto import WebhookKeyMissing, key_from_text, new_key

    key_file = state_dir / KEY_FILE_NAME
    key = key_file.read_text().strip() if key_file.exists() else ""
    try:
        key_from_text(key)
    except WebhookKeyMissing:  # none yet (or not a key): the first start makes it
        # A file that held something else is replaced: nothing could have been sealed
        # under it, since the stack would not have started with it.
        key = new_key()
        key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    os.environ["WEBHOOK_KEY"] = key
    return key_file


def webhook_subscription(topic: str, base_url: str, ack_deadline_seconds: int) -> dict[str, Any]:
    """The emulator's push subscription to the webhooks function. No dead-letter policy
    here: the emulator then retries every second until the function takes the message
    (its queueing is idempotent by event id), and nothing in the local stack would
    replay a dead-lettered message into the webhook store (the supervisor's replay
    stores into the audit)."""
    return {
        "topic": topic,
        "push_config": {"push_endpoint": f"{base_url}/webhooks"},
        "ack_deadline_seconds": ack_deadline_seconds,
    }


def retry_loop(base_url: str, stop: threading.Event, interval: float = RETRY_INTERVAL) -> None:
    """Cloud Scheduler's webhooks_retry job, locally; a failed call is one WARNING line."""
    from seatlease.logs import log

    while not stop.wait(interval):
        request = urllib.request.Request(  # noqa: S310 (our own loopback URL)
            f"{base_url}/webhooks_retry", data=b"", method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:  # noqa: S310
                resp.read()
        except OSError as exc:
            log("WARNING", "local scheduler: webhooks_retry call failed", error=str(exc))


def start_retry_loop(base_url: str, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(
        target=retry_loop, args=(base_url, stop), name="webhooks-scheduler", daemon=True
    )
    thread.start()
    return thread
