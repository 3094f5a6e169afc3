"""A small stand-in for the Secret Manager REST API (v1) on loopback, for the tests of the
cloud key path: Secret Manager has no emulator. The real google-cloud-secret-manager
client talks to it (REST transport, ``SECRET_MANAGER_ENDPOINT=http://127.0.0.1:PORT``,
anonymous credentials), so what is exercised is the client library, its JSON mapping and
seatlease's calls; only the server side is ours.

It serves what seatlease uses, with the API's documented shapes and rules: get and patch
(``updateMask=annotations``, etag checked: a stale one is ``409 ABORTED``) a secret;
add, list (``filter=state:ENABLED``), access and disable versions. Versions are numbered
from 1; disabled ones cannot be accessed (``400 FAILED_PRECONDITION``). Every request is
recorded in ``calls`` as ``(method, path)``.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Version:
    number: int
    data: bytes
    created: datetime
    state: str = "ENABLED"


@dataclass
class Secret:
    name: str
    annotations: dict[str, str] = field(default_factory=dict)
    versions: list[Version] = field(default_factory=list)
    generation: int = 1

    @property
    def etag(self) -> str:
        return f'"{self.generation}"'

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "replication": {"automatic": {}},
            "createTime": "2026-01-01T00:00:00Z",
            "annotations": self.annotations,
            "etag": self.etag,
        }


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class FakeSecretManager:
    def __init__(self) -> None:
        self.secrets: dict[str, Secret] = {}
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FakeSecretManager:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def create_secret(self, name: str) -> Secret:
        """What Terraform does: the secret, no version."""
        self.secrets[name] = Secret(name)
        return self.secrets[name]

    # -- the API ----------------------------------------------------------------------

    def _version_json(self, secret: Secret, version: Version) -> dict[str, Any]:
        return {
            "name": f"{secret.name}/versions/{version.number}",
            "createTime": _stamp(version.created),
            "state": version.state,
            "etag": f'"v{version.number}"',
        }

    def handle(self, method: str, raw_path: str, body: dict[str, Any]) -> tuple[int, Any]:
        parsed = urllib.parse.urlsplit(raw_path)
        path, query = parsed.path, urllib.parse.parse_qs(parsed.query)
        self.calls.append((method, path))
        if not path.startswith("/v1/"):
            return 404, None
        resource, _, verb = path[4:].partition(":")
        parts = resource.split("/")
        if len(parts) < 4 or parts[0] != "projects" or parts[2] != "secrets":
            return 404, None
        secret = self.secrets.get("/".join(parts[:4]))
        if secret is None:
            return 404, None
        rest = parts[4:]
        if not rest and method == "GET" and not verb:
            return 200, secret.to_json()
        if not rest and method == "PATCH":
            if query.get("updateMask") != ["annotations"]:
                return 400, "only updateMask=annotations is served here"
            update = body
            if update.get("etag") not in (None, "", secret.etag):
                return 409, "etag mismatch"
            secret.annotations = dict(update.get("annotations") or {})
            secret.generation += 1
            return 200, secret.to_json()
        if not rest and method == "POST" and verb == "addVersion":
            data = base64.b64decode(body["payload"]["data"])
            version = Version(len(secret.versions) + 1, data, datetime.now(UTC))
            secret.versions.append(version)
            return 200, self._version_json(secret, version)
        if rest == ["versions"] and method == "GET":
            wanted = (query.get("filter") or [""])[0]
            listed = [
                self._version_json(secret, v)
                for v in reversed(secret.versions)  # newest first, as the API lists them
                if wanted in ("", f"state:{v.state}")
            ]
            return 200, {"versions": listed, "totalSize": len(listed)}
        if len(rest) == 2 and rest[0] == "versions":
            try:
                version = secret.versions[int(rest[1]) - 1]
            except (ValueError, IndexError):
                return 404, None
            if method == "GET" and verb == "access":
                if version.state != "ENABLED":
                    return 400, "version is disabled"
                return 200, {
                    "name": f"{secret.name}/versions/{version.number}",
                    "payload": {"data": base64.b64encode(version.data).decode()},
                }
            if method == "POST" and verb == "disable":
                version.state = "DISABLED"
                return 200, self._version_json(secret, version)
        return 404, None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self
        statuses = {400: "FAILED_PRECONDITION", 404: "NOT_FOUND", 409: "ABORTED"}

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else {}
                with fake.lock:
                    status, answer = fake.handle(self.command, self.path, body)
                if status != 200:
                    answer = {
                        "error": {
                            "code": status,
                            "message": answer or "not found",
                            "status": statuses.get(status, "UNKNOWN"),
                        }
                    }
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
