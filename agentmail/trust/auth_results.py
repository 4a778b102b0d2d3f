"""Authentication-Results from trusted MTAs (wraps authres).

RFC 8601 §5: only headers whose authserv-id is our own MTA's mean anything; anyone can add
one with another id (or ours, which our MTA strips on the way in). Results are validated
here because authres accepts any word as a result.
"""

from __future__ import annotations

import functools
from typing import Any

from .._value import Frozen

_FAIL = {"fail", "permerror"}
_KNOWN = {"pass", "fail", "none", "neutral", "softfail", "temperror", "permerror", "policy"}


@functools.cache
def _context() -> Any:
    """authres's parser, with DMARC's results, made for the first header there is to read: a
    letter without Authentication-Results (every letter of the local post office) loads no authres."""
    import authres
    import authres.dmarc

    return authres.FeatureContext(authres.dmarc)


class TrustedVerdicts(Frozen):
    fails: tuple[str, ...]  # e.g. ("dmarc=fail",)
    dkim_pass_domains: tuple[str, ...]  # header.d of trusted dkim=pass results
    dmarc_pass_domains: tuple[str, ...] = ()  # header.from of trusted dmarc=pass results (a person's letter)


def _header_prop(result: object, name: str) -> str:
    for prop in getattr(result, "properties", ()):
        if prop.type == "header" and prop.name == name and prop.value:
            return str(prop.value).lower()
    return ""


def read(
    header_values: list[str], trusted_ids: tuple[str, ...], pinned_signature: tuple[str, str] | None = None
) -> TrustedVerdicts:
    """Only the trusted authserv-ids' spf/dkim/dmarc results; an unreadable trusted header fails.

    ``pinned_signature`` (d=, s=) names the agent signature agentmail checks itself against
    the registry: an MTA that cannot find that key (it is pinned, not published) may call it
    fail or permerror, which says nothing about the letter, so that one result is not a fail.
    """
    if not header_values:
        return TrustedVerdicts((), ())
    context = _context()
    fails: list[str] = []
    passes: list[str] = []
    dmarc_passes: list[str] = []
    trusted = {t.lower() for t in trusted_ids}
    for value in header_values:
        try:
            parsed = context.parse_value(value)
        except Exception:
            claimed = value.split(";", 1)[0].strip().lower()
            if claimed in trusted:
                fails.append(f"unreadable Authentication-Results from {claimed}")
            continue
        if str(parsed.authserv_id).lower() not in trusted:
            continue
        for result in parsed.results:
            method, outcome = str(result.method).lower(), str(result.result).lower()
            if method not in ("spf", "dkim", "dmarc"):
                continue
            signature = (_header_prop(result, "d"), _header_prop(result, "s"))
            if outcome not in _KNOWN:
                fails.append(f"{method}={outcome} (not a valid result)")
            elif outcome in _FAIL and not (method == "dkim" and signature == pinned_signature):
                fails.append(f"{method}={outcome}")
            elif method == "dkim" and outcome == "pass" and signature[0]:
                passes.append(signature[0])
            elif method == "dmarc" and outcome == "pass" and _header_prop(result, "from"):
                dmarc_passes.append(_header_prop(result, "from"))
    return TrustedVerdicts(tuple(fails), tuple(passes), tuple(dmarc_passes))
