"""The audit delivery design holds: a plain Pub/Sub push reaches a CloudEvent function.

terraform/modules/pubsub owns the audit push subscription (so that it can carry the
dead-letter policy) instead of letting Eventarc create one. The audit function is then
deployed without an event trigger, so Cloud Functions treats it as an HTTP service. This
test shows the Functions Framework still runs an ``@functions_framework.cloud_event``
function on such a push (it converts the raw push body into the same
google.cloud.pubsub.topic.v1.messagePublished CloudEvent Eventarc would send), and that
an exception answers non-2xx, which is what makes Pub/Sub retry and then dead-letter.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

FUNCTION = """
import json, os
import functions_framework

@functions_framework.cloud_event
def audit(event):
    payload = event.data["message"]
    if payload.get("attributes", {}).get("fail") == "1":
        raise RuntimeError("database down")
    with open(os.environ["OUT"], "w") as fh:
        json.dump({"type": event["type"], "source": event["source"], "id": event["id"],
                   "data": payload["data"]}, fh)
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> int:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def test_pubsub_push_body_reaches_a_cloudevent_function(tmp_path):
    (tmp_path / "main.py").write_text(FUNCTION)
    out = tmp_path / "event.json"
    port = _port()
    env = {
        **os.environ,
        "OUT": str(out),
        # What Cloud Functions sets for a function deployed without an event trigger.
        "FUNCTION_SIGNATURE_TYPE": "http",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "functions_framework",
            "--target",
            "audit",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--source",
            str(tmp_path / "main.py"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/projects/p/topics/seat-events"
    event = {"event_id": "e1", "type": "lease.acquired"}
    push = {
        "message": {
            "data": base64.b64encode(json.dumps(event).encode()).decode(),
            "attributes": {},
            "messageId": "123",
            "publishTime": "2026-11-22T00:00:00Z",
        },
        "subscription": "projects/p/subscriptions/seat-events-audit",
    }
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline and status is None:
            try:
                status = _post(url, push)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        assert status is not None and 200 <= status < 300, status
        got = json.loads(out.read_text())
        assert got["type"] == "google.cloud.pubsub.topic.v1.messagePublished"
        assert got["source"] == "//pubsub.googleapis.com/projects/p/topics/seat-events"
        assert got["id"] == "123"
        assert json.loads(base64.b64decode(got["data"])) == event

        push["message"]["attributes"] = {"fail": "1"}
        assert _post(url, push) >= 500, "a failure must be non-2xx so Pub/Sub retries"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
