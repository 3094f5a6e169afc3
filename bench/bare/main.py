"""bare: the baseline of bench/http_acquire.py, an HTTP function that only answers 200.

Served by the same functions-framework/gunicorn setup as functions/acquire/main.py, so the
difference between the two is the cost of acquire itself (auth, validation, one EVALSHA,
the JSON body and the log line).
"""

import functions_framework
from flask import Request


@functions_framework.http
def bare(request: Request) -> tuple[str, int]:
    return "", 200
