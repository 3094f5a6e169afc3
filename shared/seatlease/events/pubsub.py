"""Lease events on Pub/Sub: reading outbox entries and the publisher.

An outbox entry's field ``e`` is the event's JSON text exactly as it is published (the
Lua scripts write it: ``emit`` in lua/_lib.lua), so the reaper joins entries into
messages without decoding a single event. google-cloud-pubsub is imported lazily (it is
slow to import): only the reaper loads it. A message carries up to
``EVENTS_PER_MESSAGE`` events as a JSON array: the emulator confirms messages at about
the same rate whatever their size, and the audit function stores a message in one
statement, so more events a message means fewer of both (bench/reclaim_throughput.py
measures it; docs/benchmarks.md). ``publish`` returns only once Pub/Sub has confirmed
every message, so the caller may then delete the outbox entries; any failure raises
``PublishFailed`` and the entries stay for next time.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

EVENTS_PER_MESSAGE = 1000
SCHEMA = "seatlease.lease-events.v1"
ENTRY_FIELD = "e"  # the outbox entry's one field: the event's JSON text


class PublishFailed(Exception):
    pass


def entry_json(fields: dict[str, str]) -> str:
    """The event JSON text of an outbox entry, as published."""
    return fields[ENTRY_FIELD]


def event_from_entry(fields: dict[str, str]) -> dict[str, Any]:
    """An outbox entry as the event object (for readers: the CLI, tests)."""
    return json.loads(entry_json(fields))


def outbox_events(redis: Any, stream: str) -> list[dict[str, Any]]:
    """Every event waiting in an outbox stream, oldest first (operators' and tests' view;
    the reaper publishes the JSON texts without decoding them)."""
    return [event_from_entry(fields) for _id, fields in redis.xrange(stream)]


def encode_messages(
    events: Sequence[str | dict[str, Any]], per_message: int = EVENTS_PER_MESSAGE
) -> list[bytes]:
    """Message bodies of at most ``per_message`` events each: JSON arrays. An event is its
    JSON text (from the outbox, joined as it is) or an object."""
    texts = [e if isinstance(e, str) else json.dumps(e, separators=(",", ":")) for e in events]
    return [
        ("[" + ",".join(texts[i : i + per_message]) + "]").encode()
        for i in range(0, len(texts), per_message)
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

    def publish(self, events: Sequence[str | dict[str, Any]]) -> int:
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
