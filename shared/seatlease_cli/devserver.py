"""Serve every function of functions/ on one port, at ``/<function name>``: the same paths
Cloud Functions gives them (``https://REGION-PROJECT.cloudfunctions.net/acquire``). Each
function is loaded through ``functions_framework.create_app``, exactly as in the cloud.

    python -m seatlease_cli.devserver --port 8080            # werkzeug, for a laptop
    gunicorn 'seatlease_cli.devserver:create_app()'          # as Cloud Functions serves it
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

FUNCTIONS_DIR = Path(
    # The repository checkout this package is installed from (editable, as make installs it).
    os.environ.get("SEATLEASE_FUNCTIONS_DIR", Path(__file__).resolve().parents[2] / "functions")
)


def function_names(functions_dir: Path = FUNCTIONS_DIR) -> list[str]:
    return sorted(p.parent.name for p in functions_dir.glob("*/main.py"))


def _not_found(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = json.dumps(
        {"error": {"code": "not_found", "message": "No such function; try /acquire."}}
    ).encode()
    start_response("404 Not Found", [("Content-Type", "application/json")])
    return [body]


def create_app(names: list[str] | None = None, functions_dir: Path = FUNCTIONS_DIR) -> Any:
    """One WSGI app routing ``/<name>[/...]`` to that function's functions-framework app."""
    import functions_framework

    mounts = {
        name: functions_framework.create_app(name, str(functions_dir / name / "main.py"))
        for name in (names or function_names(functions_dir))
    }

    def dispatch(environ: dict[str, Any], start_response: Any) -> Any:
        name, _, rest = environ.get("PATH_INFO", "").lstrip("/").partition("/")
        target = mounts.get(name)
        if target is None:
            return _not_found(environ, start_response)
        environ = {**environ, "PATH_INFO": "/" + rest}
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/" + name
        return target(environ, start_response)

    return dispatch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("names", nargs="*", help="functions to serve (default: all)")
    args = parser.parse_args()
    from werkzeug.serving import run_simple

    run_simple(args.host, args.port, create_app(args.names or None), threaded=True)


if __name__ == "__main__":
    main()
