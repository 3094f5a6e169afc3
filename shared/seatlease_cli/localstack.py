"""The whole stack on one machine, for ``make run`` / ``seatlease local``.

Starts (or reuses) Redis, prepares the database (``DATABASE_URL`` when set, else SQLite in
``.seatlease/seatlease.db``, set as ``DATABASE_URL`` for its own processes), starts the
Pub/Sub emulator with the topic and push subscriptions that deliver to the locally
served audit and webhooks functions, makes a signing key for the lease tokens
(``.seatlease/signing-keys``) and the webhooks' key (seatlease_cli.localwebhooks), serves
every function on one port, runs a scheduler loop that calls the reaper (and one that
calls ``webhooks_retry``), and seeds a demo tenant, two licenses (one for the README's
tour, one for ``seatlease demo``), a seat key and a tenant admin key (the portal's link). It
records itself in ``.seatlease/local.json`` (URL, pid, demo keys), which is how the CLI
in a second terminal finds it. Everything it started stops on Ctrl-C.

While it runs, a supervisor thread heals it as a process supervisor would: a
redis-server or emulator it started that died is restarted on the same port (Redis
appends every write to a file first, in ``.seatlease/redis``, so its leases and outboxes
survive that, and a restart of the whole stack too), and the topics
and subscriptions an emulator restart lost are created again. Each heal is one JSON
WARNING line. The audit push subscription dead-letters after Terraform's number of
attempts (``AUDIT_DELIVERY``); the emulator cannot be trusted with Terraform's backoff
(see ``AuditDelivery``), so it retries every second and the supervisor stores what it
dead-lettered once the database answers: a database outage loses no event.

Without Pub/Sub (``--no-pubsub``: no emulator, no Java, no gcloud), the reaper hands its
outbox events straight to the stack's audit function (``AuditPush``: the same push a
subscription would make, over loopback), so the audit trail, the reports and ``seatlease
demo`` work as with the emulator; an event the audit function does not take (the database
down) stays in the outbox for the next reaper run.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seatlease.events.pubsub import Publisher, PublishFailed, encode_messages
from seatlease_cli.localstate import STATE_DIR, STATE_FILE
from seatlease_cli.localwebhooks import (
    prepare_environment,
    start_retry_loop,
    webhook_subscription,
)
from seatlease_cli.procs import MissingTool, Proc, start_pubsub_emulator, start_redis

if TYPE_CHECKING:
    from google.cloud import pubsub_v1

PROJECT = "seatlease-local"
DEMO_TENANT = "demo"
# The license the README's tour uses by hand: leases long enough to acquire one with curl,
# look at it in `seatlease status` and revoke it, at a person's pace.
DEMO_LICENSE = "demo-app"
DEMO_SEATS = 2
DEMO_LEASE_SECONDS = 600
# `seatlease demo` plays its crash story on a license of its own, so it never competes with
# the tour's seats: short leases, so the crashed client's seat comes back in seconds.
STORY_LICENSE = "demo-crash"
STORY_SEATS = 2
STORY_LEASE_SECONDS = 8
DEMO_LICENSES = {
    DEMO_LICENSE: (DEMO_SEATS, DEMO_LEASE_SECONDS),
    STORY_LICENSE: (STORY_SEATS, STORY_LEASE_SECONDS),
}


@dataclass(frozen=True)
class AuditDelivery:
    """How Pub/Sub pushes to the audit function in the cloud: the audit subscription's
    retry_policy, dead_letter_policy and ack deadline (terraform/modules/pubsub;
    tests/test_localstack_heal.py compares the two).

    Locally the emulator gets the dead-letter policy and the ack deadline but **not the
    retry_policy**: its backoff loses messages. Under CPU load, some pushes that failed
    during a 30 s outage are never tried again, nor dead-lettered (8 and 9 of 30 in two
    runs with 10 s..600 s, whatever the ack deadline; none lost unloaded): the emulator's
    0.8.20 timer for delayed redeliveries stops for good once it meets a message whose
    ack deadline expired meanwhile. Without a retry_policy it retries every second and
    dead-letters after ``max_delivery_attempts`` (30 of 30 accounted for, measured), and
    the stack's supervisor stores the dead-lettered messages once the database answers
    (``LocalStack.replay_dead_letters``), as an operator would with ``seatlease audit
    replay-dead-letters``."""

    minimum_backoff_seconds: int
    maximum_backoff_seconds: int
    max_delivery_attempts: int
    ack_deadline_seconds: int


AUDIT_DELIVERY = AuditDelivery(
    minimum_backoff_seconds=10,
    maximum_backoff_seconds=600,
    max_delivery_attempts=10,
    ack_deadline_seconds=60,
)
HEAL_INTERVAL = 1.0  # seconds between the supervisor's checks (a poll and two list calls)
# Seconds between the supervisor's replays of the dead-letter subscription: each replay
# first checks the database (one query), then pulls.
REPLAY_INTERVAL = 5.0


class AuditPush(Publisher):
    """The reaper's publisher without Pub/Sub: each message (the events, as Pub/Sub would
    carry them) is pushed to the audit function at ``audit_url`` in a push subscription's
    envelope, and counts as confirmed once it answers 2xx, as a push subscription acks.
    Anything else is ``PublishFailed``: the entries stay in the outbox for the next run."""

    def __init__(
        self, audit_url: str, timeout: float = 30.0, also: dict[str, str] | None = None
    ) -> None:
        super().__init__(project=PROJECT, timeout=timeout)
        self.audit_url = audit_url
        # More functions pushed the same messages, by subscription suffix (the webhooks):
        # a refusal by any keeps the entries for the next run (each function takes a
        # message again idempotently, as from a redelivering subscription).
        self.targets = {"audit": audit_url, **(also or {})}
        self._sent = 0

    def publish(self, events: Any) -> int:
        if not events:
            return 0
        for data in encode_messages(events):
            for suffix, url in self.targets.items():
                self._push(data, f"projects/{PROJECT}/subscriptions/{self.topic_id}-{suffix}", url)
        return len(events)

    def _push(self, data: bytes, subscription: str, url: str) -> None:
        self._sent += 1
        envelope = {
            "subscription": subscription,
            "message": {
                "data": base64.b64encode(data).decode(),
                "messageId": f"local-{os.getpid()}-{time.time_ns()}-{self._sent}",
                "attributes": {"events": str(data.count(b'"event_id"'))},
            },
        }
        request = urllib.request.Request(  # noqa: S310 (our own loopback URL)
            url, data=json.dumps(envelope).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310
                resp.read()
        except OSError as exc:  # HTTPError (the audit function's 503) included
            raise PublishFailed(f"{url}: {exc}".splitlines()[0][:300]) from exc


class PortInUse(Exception):
    """The stack's port is taken: said before anything is started."""

    def __init__(self, port: int) -> None:
        super().__init__(
            f"port {port} is in use: pick another with --port N "
            f"(`seatlease local --port N`, or `make run PORT=N`)"
        )
        self.port = port


DEFAULT_PORT = 8080


@dataclass
class LocalStack:
    port: int = DEFAULT_PORT
    reaper_interval: float = 5.0
    pubsub: bool = True
    say: Callable[[str], None] = print
    audit_delivery: AuditDelivery = AUDIT_DELIVERY
    heal_interval: float = HEAL_INTERVAL
    replay_interval: float = REPLAY_INTERVAL
    procs: list[Proc] = field(default_factory=list)
    # The services this stack started, by name, which the supervisor restarts if they die.
    services: dict[str, Proc] = field(default_factory=dict)
    stop_event: threading.Event = field(default_factory=threading.Event)
    server: Any = None
    _heal_lock: threading.Lock = field(default_factory=threading.Lock)
    _pubsub_admin: tuple[Any, Any] | None = None
    _next_replay: float = 0.0
    _listener: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _step(self, what: str, action: Callable[[], Any]) -> Any:
        self.say(f"  {what} ...")
        started = time.monotonic()
        result = action()
        self.say(f"  {what}: ok ({time.monotonic() - started:.1f} s)")
        return result

    def _bind(self) -> None:
        """Take the port before starting anything: another program (or another stack
        starting at the same moment) that holds it is ``PortInUse``, said at once, not
        after Redis, the database and the emulator have started."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug does
        try:
            listener.bind(("127.0.0.1", self.port))
            listener.listen(128)
        except OSError as exc:
            listener.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(self.port) from None
            raise
        self._listener = listener

    def start(self) -> dict[str, Any]:
        self._bind()
        STATE_DIR.mkdir(exist_ok=True)
        # The functions' JSON log lines (a reaper run every few seconds) would scroll the
        # banner away: warnings and errors only, unless LOG_LEVEL says otherwise.
        from seatlease import logs

        logs.configure(os.environ.get("LOG_LEVEL", "WARNING"), stream="stdout")
        if not os.environ.get("REDIS_URL"):
            # Kept in .seatlease/redis across restarts of the stack: the leases held, the
            # outboxes and what the service remembers of the leases it ended (a revoke
            # stays final). Without it, a restart is a loss of Redis's data (a recovery
            # window: docs/design.md, "A region lost").
            data = STATE_DIR / "redis"
            redis = self._step(
                "starting redis-server", lambda: start_redis(persist=True, data_dir=data)
            )
            self.procs.append(redis)
            self.services["redis-server"] = redis
            os.environ["REDIS_URL"] = redis.url
            self.say(f"  redis-server: its data in {data} (leases survive a restart)")
        else:
            self.say(f"  using REDIS_URL {os.environ['REDIS_URL'].split('@')[-1]}")
        if not any(os.environ.get(v) for v in ("DATABASE_URL", "CLOUD_SQL_INSTANCE")):
            # Named explicitly (an absolute path), so the stack's own processes never rely
            # on a default that depends on their working directory.
            database = (STATE_DIR / "seatlease.db").resolve()
            os.environ["DATABASE_URL"] = f"sqlite:///{database}"
            self.say(f"  database: SQLite in {STATE_DIR / 'seatlease.db'} (DATABASE_URL unset)")
        self._step("preparing the database", self._prepare_database)
        if self.pubsub:
            emulator = self._step("starting the Pub/Sub emulator", start_pubsub_emulator)
            self.procs.append(emulator)
            self.services["Pub/Sub emulator"] = emulator
            os.environ["PUBSUB_EMULATOR_HOST"] = emulator.url
            os.environ["GOOGLE_CLOUD_PROJECT"] = PROJECT
        os.environ.setdefault("PUBSUB_TOPIC", "seat-events")
        # A refused client is judged one minute after its minute (not 10): the tour's
        # `seatlease report sizing` shows the demo's refusals two minutes later.
        os.environ.setdefault("TRUE_DENIAL_MINUTES", "1")
        self._signing_keys()
        if prepare_environment(STATE_DIR) is not None:
            self.say(f"  webhooks: secrets sealed with {STATE_DIR / 'webhook-key'}")
        self._step(f"serving the functions on {self.base_url}", self._serve)
        if self.pubsub:
            self._step("creating the topic and the push subscription", self._wire_pubsub)
        else:
            from seatlease.events import reaper

            webhooks = {"webhooks": f"{self.base_url}/webhooks"}
            reaper.use_publisher(AuditPush(f"{self.base_url}/audit", also=webhooks))
        demo = self._step("seeding the demo tenant, licenses and API key", self._seed)
        threading.Thread(target=self._scheduler, name="scheduler", daemon=True).start()
        start_retry_loop(self.base_url, self.stop_event)  # webhooks' retries and alerts
        threading.Thread(target=self._supervisor, name="supervisor", daemon=True).start()
        # pid: the CLI tells a running stack from a stale file (seatlease_cli.backend).
        events = "pubsub" if self.pubsub else "in-process"  # the banner says which
        state = {"base_url": self.base_url, "pid": os.getpid(), "events": events, **demo}
        STATE_FILE.write_text(json.dumps(state, indent=2))
        STATE_FILE.chmod(0o600)  # it holds the demo API key
        return state

    def _signing_keys(self) -> None:
        """Lease tokens are signed with the keys of .seatlease/signing-keys (the first one
        is made here), unless SIGNING_KEYS_DIR or SIGNING_KEY_SECRET names others."""
        os.environ.setdefault("SEATLEASE_ISSUER", self.base_url)
        if os.environ.get("SIGNING_KEYS_DIR") or os.environ.get("SIGNING_KEY_SECRET"):
            return
        from seatlease.api.signingkeys import next_key_file

        folder = (STATE_DIR / "signing-keys").resolve()
        if not list(folder.glob("*.pem")):
            next_key_file(folder)
        folder.chmod(0o700)
        os.environ["SIGNING_KEYS_DIR"] = str(folder)
        self.say(f"  signing keys: {STATE_DIR / 'signing-keys'} (seatlease keys rotate --dir)")

    def _prepare_database(self) -> None:
        from seatlease.records import store

        store.upgrade()

    def _serve(self) -> None:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log lines
        from seatlease_cli.devserver import create_app, make_server

        assert self._listener is not None  # start() bound it first
        self.server = make_server("127.0.0.1", self.port, create_app(), fd=self._listener.fileno())
        threading.Thread(target=self.server.serve_forever, name="http", daemon=True).start()

    def _pubsub_names(self) -> dict[str, dict[str, Any]]:
        """The topics and subscriptions of the stack, named as terraform/modules/pubsub
        names them (so the operations guide's commands work locally too), by kind."""
        topic = os.environ["PUBSUB_TOPIC"]
        dead_letter = f"{topic}-dead-letter"
        policy = self.audit_delivery
        return {
            "topics": {topic: {}, dead_letter: {}},
            "subscriptions": {
                f"{topic}-audit": {
                    "topic": topic,
                    "push_config": {"push_endpoint": f"{self.base_url}/audit"},
                    "ack_deadline_seconds": policy.ack_deadline_seconds,
                    # No retry_policy: the emulator's loses messages (AuditDelivery).
                    "dead_letter_policy": {
                        "dead_letter_topic": dead_letter,
                        "max_delivery_attempts": policy.max_delivery_attempts,
                    },
                },
                f"{topic}-webhooks": webhook_subscription(
                    topic, self.base_url, policy.ack_deadline_seconds
                ),
                # Keeps dead-lettered messages for `seatlease audit replay-dead-letters`.
                f"{dead_letter}-hold": {"topic": dead_letter},
            },
        }

    def _pubsub_clients(self) -> tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]:
        if self._pubsub_admin is None:
            from google.cloud import pubsub_v1

            self._pubsub_admin = (pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient())
        return self._pubsub_admin

    def _wire_pubsub(self, only: set[str] | None = None) -> None:
        """Create the topics and subscriptions (``only`` those names); existing ones stay."""
        from google.api_core.exceptions import AlreadyExists

        publisher, subscriber = self._pubsub_clients()
        names = self._pubsub_names()
        for name in names["topics"]:
            if only is None or name in only:
                try:
                    publisher.create_topic(name=publisher.topic_path(PROJECT, name))
                except AlreadyExists:
                    pass
        for name, spec in names["subscriptions"].items():
            if only is not None and name not in only:
                continue
            request = {"name": subscriber.subscription_path(PROJECT, name), **spec}
            request["topic"] = publisher.topic_path(PROJECT, spec["topic"])
            if "dead_letter_policy" in spec:
                dead_letter = spec["dead_letter_policy"]["dead_letter_topic"]
                request["dead_letter_policy"] = {
                    **spec["dead_letter_policy"],
                    "dead_letter_topic": publisher.topic_path(PROJECT, dead_letter),
                }
            try:
                subscriber.create_subscription(request=request)
            except AlreadyExists:
                pass

    def _missing_pubsub(self) -> set[str]:
        """The stack's topics and subscriptions the emulator does not have (all of them
        after it restarted: it keeps everything in memory)."""
        publisher, subscriber = self._pubsub_clients()
        project = f"projects/{PROJECT}"
        topics = {t.name.rsplit("/", 1)[1] for t in publisher.list_topics(project=project)}
        subscriptions = {
            s.name.rsplit("/", 1)[1] for s in subscriber.list_subscriptions(project=project)
        }
        names = self._pubsub_names()
        return (set(names["topics"]) - topics) | (set(names["subscriptions"]) - subscriptions)

    def _seed(self) -> dict[str, str]:
        from seatlease.api import runtime
        from seatlease.apikeys import hash_key, well_formed
        from seatlease.records import store

        try:
            store.create_tenant(DEMO_TENANT, "Demo tenant")
        except store.Conflict:
            pass
        for license_id, (seats, lease_seconds) in DEMO_LICENSES.items():
            try:
                store.create_license(
                    DEMO_TENANT, license_id, seats=seats, lease_seconds=lease_seconds
                )
            except store.Conflict:  # from an earlier start: back to the demo's settings
                store.update_license(
                    DEMO_TENANT, license_id, seats=seats, lease_seconds=lease_seconds
                )

        def demo_key(key_file: Path, scope: str, label: str) -> str:
            """The key of an earlier start, while it is still the demo tenant's of this
            scope; else a new one."""
            key = key_file.read_text().strip() if key_file.exists() else ""
            if not well_formed(key) or store.key_for_hash(hash_key(key)) != (DEMO_TENANT, scope):
                key = store.create_api_key(DEMO_TENANT, label=label, scope=scope).key
                key_file.write_text(key + "\n")
                key_file.chmod(0o600)
            return key

        key = demo_key(STATE_DIR / "demo-api-key", "seat", "local demo")
        admin_key = demo_key(STATE_DIR / "demo-admin-key", "admin", "local demo portal")
        for license_id in DEMO_LICENSES:
            runtime.refresh_license_cache(DEMO_TENANT, license_id)
        return {
            "tenant_id": DEMO_TENANT,
            "license_id": DEMO_LICENSE,
            "story_license_id": STORY_LICENSE,
            "api_key": key,
            "admin_key": admin_key,
            # The key rides in the fragment, which the browser never sends: the page moves
            # it into the tab's sessionStorage and out of the address bar.
            "portal_url": f"{self.base_url}/portal#key={admin_key}",
        }

    def _scheduler(self) -> None:
        """Cloud Scheduler's job, locally: POST the reaper every few seconds."""
        from seatlease.logs import log

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

    def _supervisor(self) -> None:
        """Every ``heal_interval`` seconds, heal what can be healed (see ``heal``)."""
        while not self.stop_event.wait(self.heal_interval):
            self.heal()

    def heal(self) -> list[str]:
        """Restart the services this stack started that died (same port: REDIS_URL and
        PUBSUB_EMULATOR_HOST stay valid), then create the topics and subscriptions the
        emulator lacks. Logs one WARNING line per heal, one ERROR line per failed attempt
        (tried again next time); returns what it healed."""
        healed: list[str] = []
        with self._heal_lock:  # stop() takes it too: no restart races a shutdown
            if self.stop_event.is_set():
                return healed
            for name, service in self.services.items():
                if not service.alive() and self._restart(name, service):
                    healed.append(name)
            if "Pub/Sub emulator" in self.services:
                healed.extend(self._rewire())
                if time.monotonic() >= self._next_replay:
                    self._next_replay = time.monotonic() + self.replay_interval
                    healed.extend(self.replay_dead_letters())
        return healed

    def replay_dead_letters(self) -> list[str]:
        """Store the messages the emulator dead-lettered (``seatlease audit
        replay-dead-letters`` on the hold subscription), once the database answers; says
        so in one WARNING line. Returns ``["dead letters"]`` when it stored any."""
        from seatlease.errors import BackendUnavailable
        from seatlease.logs import log
        from seatlease_cli.audit import replay
        from seatlease_cli.exits import CommandError

        hold = f"projects/{PROJECT}/subscriptions/{os.environ['PUBSUB_TOPIC']}-dead-letter-hold"
        try:
            result = replay(hold, subscriber=self._pubsub_clients()[1])
        except (BackendUnavailable, CommandError):  # the database or the emulator is down
            return []
        except Exception as exc:  # a supervisor keeps going: next time tries again
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            log("ERROR", "local stack: could not replay the dead-lettered events", error=error)
            return []
        if not result.messages:
            return []
        log("WARNING", "local stack: stored the events the emulator dead-lettered",
            messages=result.messages, events=result.events, inserted=result.inserted)  # fmt: skip
        return ["dead letters"]

    def _restart(self, name: str, service: Proc) -> bool:
        from seatlease.logs import log

        try:
            service.restart()
        except Exception as exc:  # a supervisor keeps going: next check tries again
            error = f"{type(exc).__name__}: {exc}"[:500]
            log("ERROR", f"local stack: {name} died and did not restart", error=error)
            return False
        if name == "Pub/Sub emulator":
            self._pubsub_admin = None  # fresh channels rather than ones in reconnect backoff
        address = service.url.split("@")[-1]
        log("WARNING", f"local stack: {name} died; restarted it", service=name, address=address)
        return True

    def _rewire(self) -> list[str]:
        from seatlease.logs import log

        try:
            missing = sorted(self._missing_pubsub())
            if missing:
                self._wire_pubsub(only=set(missing))
        except Exception as exc:  # the emulator is (re)starting, or busy: next check
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            log("ERROR", "local stack: could not check the Pub/Sub wiring", error=error)
            return []
        if missing:
            log("WARNING", "local stack: created the Pub/Sub topics and subscriptions the "
                "emulator lost", recreated=missing)  # fmt: skip
        return missing

    def stop(self) -> None:
        self.stop_event.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._heal_lock:
            for proc in reversed(self.procs):
                proc.stop()
            self.procs.clear()
            self.services.clear()


def _port_note(base: str) -> str:
    """On another port than the README's examples use, say so once."""
    port = base.rsplit(":", 1)[-1]
    if port == str(DEFAULT_PORT):
        return ""
    return f" on port {port} (where the README says 127.0.0.1:{DEFAULT_PORT}, use {base})"


def _events_note(state: dict[str, Any]) -> str:
    """Where the reaper's lease events go: said once, in the banner."""
    if state.get("events") == "in-process":
        return (
            "no Pub/Sub (--no-pubsub): the reaper hands them straight to /audit "
            "in-process\n              (the audit trail and reports work as with Pub/Sub)"
        )
    return "reaper -> Pub/Sub emulator -> /audit (push subscription)"


def banner(state: dict[str, Any]) -> str:
    base, key, lic = state["base_url"], state["api_key"], state["license_id"]
    return f"""
seatlease is running locally{_port_note(base)}.

  client API  {base}/acquire  {base}/heartbeat  {base}/release
  public keys {base}/keys (JWKS: verifies the lease tokens)
  internal    {base}/admin (no auth on loopback)  {base}/reaper  {base}/audit
  webhooks    seatlease webhook create --tenant {state["tenant_id"]} --url http://127.0.0.1:PORT/hook
  events      {_events_note(state)}
  tenant      {state["tenant_id"]}
  licenses    {lic}: {DEMO_SEATS} seats, {DEMO_LEASE_SECONDS} s leases (for you)
              {STORY_LICENSE}: {STORY_SEATS} seats, {STORY_LEASE_SECONDS} s leases (the demo)
  API key     {key}   (also in {STATE_DIR / "demo-api-key"})
  portal      {state["portal_url"]}
              the demo tenant's own page: its seats, leases, usage and keys (the link
              signs in with its admin key, also in {STATE_DIR / "demo-admin-key"})

Try it:

  curl -s -X POST {base}/acquire -H 'Authorization: Bearer {key}' \\
       -H 'Content-Type: application/json' \\
       -d '{{"license_id": "{lic}", "client_id": "laptop-1", "metadata": {{"user": "ann"}}}}'

  seatlease demo        # three clients, two seats, one crash: watch the seat come back
  seatlease status      # who holds what (like lmstat -a), from this folder or below

Logs: warnings and errors only; `LOG_LEVEL=INFO make run` shows every request.
Press Ctrl-C to stop everything this command started.
"""


__all__ = ["LocalStack", "MissingTool", "PortInUse", "banner"]
