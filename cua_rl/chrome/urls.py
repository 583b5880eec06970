"""OSWorld's URL equivalence (`compare_urls`), used by the URL metrics and by the
`chrome_close_tabs` setup step.

Two URLs are the same page when they agree after normalisation: a missing
scheme reads as http, the host loses a lone "www" subdomain and its public
suffix (airbnb.com == airbnb.com.sg), a path of "/" is empty; params, query and
fragment count unless `full` is false. The public-suffix list is the snapshot
bundled with tldextract (never fetched at run time).
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import ParseResult, urlparse, urlunparse

from cua_rl.eval_libraries import require

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://")


@functools.cache
def _extractor() -> Any:
    tldextract = require("tldextract", "tldextract", metric="compare_urls")
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def normalize_url(url: str, *, full: bool = True) -> str:
    parsed = urlparse(url if _SCHEME.match(url) else f"http://{url}")
    parts = _extractor()(parsed.netloc.lower())
    subdomain = "" if parts.subdomain == "www" else parts.subdomain
    netloc = f"{subdomain}.{parts.domain}" if subdomain else parts.domain
    return urlunparse(
        ParseResult(
            scheme=parsed.scheme.lower(),
            netloc=netloc,
            path=parsed.path if parsed.path != "/" else "",
            params=parsed.params if full else "",
            query=parsed.query if full else "",
            fragment=parsed.fragment if full else "",
        )
    )


def compare_urls(url1: str | None, url2: str | None, full: bool = True) -> bool:
    """OSWorld's URL equality (see the module docstring); None equals only None."""
    if url1 is None or url2 is None:
        return url1 == url2
    return normalize_url(url1, full=full) == normalize_url(url2, full=full)
