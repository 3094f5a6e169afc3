"""The whole stack on one machine, for ``make run`` / ``seatlease local``.

Starts (or reuses) Redis, prepares the database (PostgreSQL when ``DATABASE_URL`` is set,
SQLite otherwise), starts the Pub/Sub emulator with the topic and a push subscription
that delivers to the locally served audit function, serves every function on one port,
runs a scheduler loop that calls the reaper, and seeds a demo tenant, license and API
key. Everything it started stops on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.localprocs import MissingTool, Proc, start_pubsub_emulator, start_redis

STATE_DIR = Path(".seatlease")
STATE_FILE = STATE_DIR / "local.json"
PROJECT = "seatlease-local"
DEMO_TENANT = "demo"
DEMO_LICENSE = "demo-app"
DEMO_SEATS = 2
DEMO_LEASE_SECONDS = 8  # short, so a crashed client's seat comes back in seconds


@dataclass
class LocalStack:
    port: int = 8080
    reaper_interval: float = 5.0
    pubsub: bool = True
    say: Callable[[str], None] = print
    procs: list[Proc] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)
    server: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _step(self, what: str, action: Callable[[], Any]) -> Any:
        self.say(f"  {what} ...")
        started = time.monotonic()
        result = action()
        self.say(f"  {what}: ok ({time.monotonic() - started:.1f} s)")
        return result

    def start(self) -> dict[str, str]:
        STATE_DIR.mkdir(exist_ok=True)
        # The functions' JSON log lines (a reaper run every few seconds) would scroll the
        # banner away: warnings and errors only, unless LOG_LEVEL says otherwise.
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        if not os.environ.get("REDIS_URL"):
            redis = self._step("starting redis-server", start_redis)
            self.procs.append(redis)
            os.environ["REDIS_URL"] = redis.url
        else:
            self.say(f"  using REDIS_URL {os.environ['REDIS_URL'].split('@')[-1]}")
        self._step("preparing the database", self._prepare_database)
        if self.pubsub:
            emulator = self._step("starting the Pub/Sub emulator", start_pubsub_emulator)
            self.procs.append(emulator)
            os.environ["PUBSUB_EMULATOR_HOST"] = emulator.url
            os.environ["GOOGLE_CLOUD_PROJECT"] = PROJECT
        os.environ.setdefault("PUBSUB_TOPIC", "seat-events")
        self._step(f"serving the functions on {self.base_url}", self._serve)
        if self.pubsub:
            self._step("creating the topic and the push subscription", self._wire_pubsub)
        demo = self._step("seeding the demo tenant, license and API key", self._seed)
        threading.Thread(target=self._scheduler, name="scheduler", daemon=True).start()
        state = {"base_url": self.base_url, **demo}
        STATE_FILE.write_text(json.dumps(state, indent=2))
        STATE_FILE.chmod(0o600)  # it holds the demo API key
        return state

    def _prepare_database(self) -> None:
        from shared import store

        store.upgrade()

    def _serve(self) -> None:
        import logging

        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log lines
        from shared.devserver import create_app

        self.server = make_server("127.0.0.1", self.port, create_app(), threaded=True)
        threading.Thread(target=self.server.serve_forever, name="http", daemon=True).start()

    def _wire_pubsub(self) -> None:
        from google.api_core.exceptions import AlreadyExists
        from google.cloud import pubsub_v1

        publisher = pubsub_v1.PublisherClient()
        subscriber = pubsub_v1.SubscriberClient()
        topic = publisher.topic_path(PROJECT, os.environ["PUBSUB_TOPIC"])
        dead_letter = publisher.topic_path(PROJECT, "seat-events-dead-letter")
        for path in (topic, dead_letter):
            try:
                publisher.create_topic(name=path)
            except AlreadyExists:
                pass
        subscriptions = {
            "audit-push": {
                "topic": topic,
                "push_config": {"push_endpoint": f"{self.base_url}/audit"},
                "dead_letter_policy": {
                    "dead_letter_topic": dead_letter,
                    "max_delivery_attempts": 5,
                },
            },
            "seat-events-dead-letter": {"topic": dead_letter},
        }
        for name, spec in subscriptions.items():
            try:
                subscriber.create_subscription(
                    request={"name": subscriber.subscription_path(PROJECT, name), **spec}
                )
            except AlreadyExists:
                pass

    def _seed(self) -> dict[str, str]:
        from shared import runtime, store

        key_file = STATE_DIR / "demo-api-key"
        try:
            store.create_tenant(DEMO_TENANT, "Demo tenant")
        except store.Conflict:
            pass
        try:
            store.create_license(
                DEMO_TENANT, DEMO_LICENSE, seats=DEMO_SEATS, lease_seconds=DEMO_LEASE_SECONDS
            )
        except store.Conflict:
            pass
        key = key_file.read_text().strip() if key_file.exists() else ""
        if not key or store.tenant_for_key_hash(store.hash_api_key(key)) != DEMO_TENANT:
            key = store.create_api_key(DEMO_TENANT, label="local demo").key
            key_file.write_text(key + "\n")
            key_file.chmod(0o600)
        runtime.refresh_license_cache(DEMO_TENANT, DEMO_LICENSE)
        return {"tenant_id": DEMO_TENANT, "license_id": DEMO_LICENSE, "api_key": key}

    def _scheduler(self) -> None:
        """Cloud Scheduler's job, locally: POST the reaper every few seconds."""
        from shared.logs import log

        while not self.stop_event.wait(self.reaper_interval):
            request = urllib.request.Request(  # noqa: S310 (our own loopback URL)
                f"{self.base_url}/reaper", data=b"{}", method="POST",
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310
                    resp.read()
            except OSError as exc:
                log("WARNING", "local scheduler: reaper call failed", error=str(exc))

    def stop(self) -> None:
        self.stop_event.set()
        if self.server is not None:
            self.server.shutdown()
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()


def banner(state: dict[str, str]) -> str:
    base, key, lic = state["base_url"], state["api_key"], state["license_id"]
    return f"""
seatlease is running locally.

  client API  {base}/acquire  {base}/heartbeat  {base}/release
  internal    {base}/admin (no auth on loopback)  {base}/reaper  {base}/audit
  tenant      {state["tenant_id"]}
  license     {lic}: {DEMO_SEATS} seats, {DEMO_LEASE_SECONDS} s leases
  API key     {key}   (also in {STATE_DIR / "demo-api-key"})

Try it:

  curl -s -X POST {base}/acquire -H 'Authorization: Bearer {key}' \\
       -H 'Content-Type: application/json' \\
       -d '{{"license_id": "{lic}", "client_id": "laptop-1", "metadata": {{"user": "ann"}}}}'

  seatlease demo        # three clients, two seats, one crash: watch the seat come back
  seatlease status      # who holds what (like lmstat -a)

Logs: warnings and errors only; `LOG_LEVEL=INFO make run` shows every request.
Press Ctrl-C to stop everything this command started.
"""


__all__ = ["LocalStack", "MissingTool", "banner"]
