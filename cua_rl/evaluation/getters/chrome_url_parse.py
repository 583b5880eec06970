"""Pure parsing of an active tab's URL, as OSWorld's URL getters do it.

Kept free of any desktop access so the rules can be unit tested: the getters
in `chrome_tabs.py` fetch the URL and hand it to these functions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

log = logging.getLogger(__name__)


def query_params(url: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """`active_tab_url_parse`: the first value of each `parse_keys` query parameter
    ("" when absent), keys renamed by `replace`, values split on "," with `split_list`."""
    params = parse_qs(urlparse(url).query)
    out: dict[str, Any] = {key: params.get(key, [""])[0] for key in config["parse_keys"]}
    for old, new in (config.get("replace") or {}).items():
        out[new] = out.pop(old)
    if config.get("split_list", False):
        out = {key: value.split(",") for key, value in out.items()}
    return out


def dash_part(url: str, config: Mapping[str, Any]) -> Any:
    """`url_dashPart`: the `partIndex`-th "/"-separated part of the URL (negative
    indices count from the end), without its query with `needDeleteId`; returned
    as a string or as {key: part} (`returnType` "json"). None when out of range."""
    try:
        index = int(config["partIndex"])
    except (TypeError, ValueError):
        log.error("url_dashPart: partIndex %r is not an integer", config.get("partIndex"))
        return None
    parts = url.split("/")
    if index >= len(parts) or -index > len(parts):
        return None
    part = parts[index]
    if config.get("needDeleteId", False):
        part = part.split("?")[0]
    if config["returnType"] == "string":
        return part
    if config["returnType"] == "json":
        return {config["key"]: part}
    log.error("url_dashPart: returnType %r is neither 'string' nor 'json'", config["returnType"])
    return None


_FIFTY_OFF = "50_PERCENT_ off & more"


def macys_path(url: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """`url_path_parse` (OSWorld's Macy's product-listing parser).

    The path holds facets as a pair of comma-separated segments
    (`/Product_department,Men_regular_size_t/Shirts,L`). The result has
    `mens_clothing`, `shirts`, `short_sleeve` (True or None) and each of
    `parse_keys` found among the facets; `Price_discount_range` is reduced to
    whether exactly the 50 %-off bucket (and not 30 % or 20 %) was chosen.
    """
    path = unquote(urlparse(url).path)
    result: dict[str, Any] = {"mens_clothing": True if "mens-clothing" in path else None}
    parts = path.strip("/").split("/")
    facets: dict[str, Any] = {}
    shirts = "shirts" in path
    short_sleeve = "short-sleeve" in path
    for i in range(len(parts) - 1):
        if "," in parts[i] and "," in parts[i + 1]:
            keys = [k.strip() for k in parts[i].split(",")]
            values = [v.strip() for v in parts[i + 1].split(",")]
            for key, value in zip(keys, values, strict=False):
                if key == "Price_discount_range":
                    facets[key] = [item.strip() for item in value.split("|")] if value else None
                else:
                    facets[key] = value or None
                if key == "Product_department" and value in ("shirts", "Shirts", "Shirt"):
                    shirts = True
                if key == "Sleeve_length" and value in ("short-sleeve", "Short Sleeve"):
                    short_sleeve = True
            break
    for key in ("Men_regular_size_t", "Price_discount_range"):
        facets.setdefault(key, None)
    result["shirts"] = True if shirts else None
    result["short_sleeve"] = True if short_sleeve else None
    for key in config["parse_keys"]:
        if key not in facets:
            continue
        if key == "Price_discount_range":
            ranges = facets[key] or []
            only_fifty = (
                _FIFTY_OFF in ranges
                and "30_PERCENT_ off & more" not in ranges
                and "20_PERCENT_ off & more" not in ranges
            )
            result[key] = _FIFTY_OFF if only_fifty else "not_" + _FIFTY_OFF
        else:
            result[key] = facets[key]
    return result


def same_page_url(a: str, b: str) -> bool:
    """How `active_tab_html_parse` finds the tab: percent-decoded, trailing "/" ignored."""
    return unquote(a).rstrip("/") == unquote(b).rstrip("/")
