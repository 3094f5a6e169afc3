"""Lease events on Pub/Sub: the outbox entry -> event conversion and the publisher.

google-cloud-pubsub is imported lazily (about 0.5 s): only the reaper loads it. A message
carries up to ``EVENTS_PER_MESSAGE`` events as a JSON array (the emulator publishes about
10k messages/s but 143k events/s at 100 events per message, DESIGN.md). ``publish``
returns only once Pub/Sub has confirmed every message, so the caller may then delete the
outbox entries; any failure raises ``PublishFailed`` and the entries stay for next time.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from shared.clock import rfc3339

EVENTS_PER_MESSAGE = 100
SCHEMA = "seatlease.lease-events.v1"


class PublishFailed(Exception):
    pass


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


def event_from_entry(fields: dict[str, str]) -> dict[str, Any]:
    """An outbox stream entry (written by the Lua scripts) as the published event."""
    event: dict[str, Any] = {
        "event_id": fields["event_id"],
        "type": fields["type"],
        "tenant_id": fields["tenant_id"],
        "license_id": fields["license_id"],
        "session_id": fields.get("session_id") or None,
        "client_id": fields.get("client_id") or None,
        "occurred_at": rfc3339(int(fields["at"])),
        "seats_used": _int_or_none(fields.get("used")),
        "seats_total": _int_or_none(fields.get("total")),
        "metadata": json.loads(fields["meta"]) if fields.get("meta") else {},
    }
    if "count" in fields:
        event["count"] = int(fields["count"])
    return event


def encode_messages(events: Sequence[dict[str, Any]]) -> list[bytes]:
    return [
        json.dumps(list(events[i : i + EVENTS_PER_MESSAGE]), separators=(",", ":")).encode()
        for i in range(0, len(events), EVENTS_PER_MESSAGE)
    ]


class Publisher:
    """Publishes event batches to ``PUBSUB_TOPIC`` in ``GOOGLE_CLOUD_PROJECT``."""

    def __init__(
        self, project: str | None = None, topic: str | None = None, timeout: float = 10.0
    ) -> None:
        self.project = project or os.environ.get("GOOGLE_CLOUD_PROJECT", "seatlease-local")
        self.topic_id = topic or os.environ.get("PUBSUB_TOPIC", "seat-events")
        self.timeout = timeout
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    from google.cloud import pubsub_v1

                    self._client = pubsub_v1.PublisherClient(
                        batch_settings=pubsub_v1.types.BatchSettings(
                            max_messages=100, max_bytes=4 * 1024 * 1024, max_latency=0.01
                        )
                    )
        return self._client

    @property
    def topic_path(self) -> str:
        return f"projects/{self.project}/topics/{self.topic_id}"

    def publish(self, events: Sequence[dict[str, Any]]) -> int:
        """Publish and wait for every confirmation; returns the number of events."""
        if not events:
            return 0
        from google.api_core.retry import Retry

        retry = Retry(initial=0.1, maximum=1.0, multiplier=2.0, timeout=self.timeout)
        try:
            futures = [
                self.client.publish(
                    self.topic_path,
                    data,
                    retry=retry,
                    timeout=self.timeout,
                    schema=SCHEMA,
                    events=str(data.count(b'"event_id"')),
                )
                for data in encode_messages(events)
            ]
            for future in futures:
                future.result(timeout=self.timeout + 5)
        except Exception as exc:  # every failure means: not confirmed, keep the entries
            raise PublishFailed(f"{type(exc).__name__}: {exc}".splitlines()[0][:300]) from exc
        return len(events)
