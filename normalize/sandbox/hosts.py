"""Host lists (`network = ["pypi.org", "*.example.com"]`): checking, matching, the journal's line.

A name is a DNS name (matched exactly, case-insensitively, a trailing dot
ignored), `*.` before a name of two labels or more (every name below it, not
the name itself) or an IP address. Ports are not part of the list: a listed
host is reachable on any port.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["check_host", "covered", "host_matches", "hosts_line", "normal_host"]

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def normal_host(name: str) -> str:
    """`name` as the list and the proxy compare it: lower case, no trailing dot, no brackets."""
    return name.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_dns_name(name: str) -> bool:
    labels = name.split(".")
    return len(name) <= 253 and all(_LABEL.fullmatch(label) for label in labels)


def check_host(name: object) -> str:
    """The list entry `name`, normalised; `ValueError` saying why it is not a host."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{name!r} is not a host name")
    host = normal_host(name)
    if host.startswith("*."):
        rest = host[2:]
        if "." in rest and _is_dns_name(rest):
            return host
        raise ValueError(f"{name!r}: a wildcard is `*.` before a name of two labels or more, "
                         f"such as *.example.com")
    if _is_ip(host) or _is_dns_name(host):
        return host
    raise ValueError(f"{name!r} is not a host name (a name such as pypi.org, *.example.com "
                     f"or an IP address; no scheme, port or path)")


def host_matches(host: str, hosts: Iterable[str]) -> bool:
    """Whether the requested `host` is one the list names."""
    host = normal_host(host)
    for entry in hosts:
        if entry.startswith("*."):
            if host.endswith(entry[1:]):
                return True
        elif host == entry:
            return True
    return False


def covered(entry: str, hosts: Sequence[str]) -> bool:
    """Whether the list `hosts` already reaches every host `entry` names (narrowing keeps it)."""
    if entry.startswith("*."):
        return entry in hosts or host_matches(entry[2:], [h for h in hosts if h.startswith("*.")])
    return host_matches(entry, hosts)


def hosts_line(records: Iterable[Mapping[str, Any]]) -> str | None:
    """`network: pypi.org (allowed), evil.test (refused)` from an action's recorded hosts,
    then the connections a limit refused or cut (`3936 connections refused: over …`)."""
    shown = [_shown(r) for r in records if isinstance(r, Mapping)]
    return f"network: {', '.join(shown)}" if shown else None


def _shown(record: Mapping[str, Any]) -> str:
    if "limit" in record:
        verdict, _, why = str(record["limit"]).partition(": ")
        return f"{record.get('connections')} connection(s) {verdict}: {why}"
    return f"{record.get('host')} ({'allowed' if record.get('allowed') else 'refused'})"
