"""The portal's page: one HTML document with its stylesheet and module script inlined
(shared/seatlease/portal/static/portal.html, portal.css, portal.js: no CDN, no build step), and
the headers it is served with.

The Content-Security-Policy allows exactly that stylesheet and that script, by their
SHA-256, and nothing else: no other script, no inline event handler (``onclick=``, or an
``onerror=`` a tenant's client smuggled into lease metadata), no ``style=`` attribute, no
frame, no form posting elsewhere; ``fetch`` only to the page's own origin. The script sets
every value it shows with ``textContent``, so the policy is the second line, not the first.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from importlib import resources

_STYLE_MARK = "/* portal.css */"
_SCRIPT_MARK = "/* portal.js */"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@lru_cache(maxsize=1)
def page() -> tuple[bytes, dict[str, str]]:
    """``(HTML, headers)``, assembled once per instance."""
    static = resources.files("seatlease.portal") / "static"
    html = (static / "portal.html").read_text(encoding="utf-8")
    css = (static / "portal.css").read_text(encoding="utf-8")
    js = (static / "portal.js").read_text(encoding="utf-8")
    assert html.count(_STYLE_MARK) == 1 and html.count(_SCRIPT_MARK) == 1
    html = html.replace(_STYLE_MARK, css).replace(_SCRIPT_MARK, js)
    policy = "; ".join(
        (
            "default-src 'none'",
            f"script-src {_sha256(js)}",
            f"style-src {_sha256(css)}",
            "connect-src 'self'",
            "img-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        # the page itself holds no secret, but every answer of the functions is no-store
        # (docs/api.md): nothing of the portal is kept by a cache on the way
        "Cache-Control": "no-store",
    }
    return html.encode("utf-8"), headers
