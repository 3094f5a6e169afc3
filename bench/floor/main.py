"""floor: the unavoidable work of a seat call over HTTP, for bench/http_acquire.py.

Served like functions/acquire/main.py (functions-framework, gunicorn gthread), it does
only what no seat call can skip: read the JSON body, make one EVALSHA through redis-py
(a script that returns 1, registered as the seat scripts are, on the same client
seatlease.seats.redisconn builds), and answer a small JSON object. acquire / floor is the cost
of everything of ours on top (API key check, validation, the seat script's own work, the
lease token, the log line); floor / bare is the price of one Redis round trip in this
server model.
"""

import os

import functions_framework
from flask import Request

from seatlease.seats.redisconn import connect

_script = connect(os.environ["REDIS_URL"]).register_script("return 1")


@functions_framework.http
def floor(request: Request) -> tuple[dict, int]:
    body = request.get_json()
    _script()
    return {"client_id": body["client_id"]}, 201
