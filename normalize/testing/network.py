"""Pinning host names for normalize's network proxy, so tests reach loopback servers only.

`network = ["allowed.test"]` sends a program's requests through normalize's
proxy, which resolves names through a resolver of normalize's own process
(`normalize.sandbox.proxy.set_resolver`). A test that runs normalize in-process
(or through a launcher that calls `normalize.cli.app.main`) pins its names:

    with pinned_hosts({"allowed.test": ("127.0.0.1", server_port)}):
        ...

A name left unpinned is refused (502 to the program), so a test never reaches
the internet. Nothing a program does can pin a name: only code in normalize's
own process can.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from normalize.sandbox.proxy import Resolver, set_resolver

__all__ = ["parse_pins", "pinned_hosts", "pinned_resolver"]


def pinned_resolver(pins: Mapping[str, tuple[str, int]]) -> Resolver:
    """A resolver that sends each pinned name to its (address, port), whatever port was asked."""
    table = {name.lower(): target for name, target in pins.items()}

    def resolve(host: str, port: int) -> tuple[str, int]:
        if host in table:
            return table[host]
        raise OSError(f"{host}:{port} is not pinned (a test reaches no other host)")

    return resolve


@contextmanager
def pinned_hosts(pins: Mapping[str, tuple[str, int]]) -> Iterator[None]:
    """Resolve the proxies' names through `pins` for the duration of the block."""
    previous = set_resolver(pinned_resolver(pins))
    try:
        yield
    finally:
        set_resolver(previous)


def parse_pins(words: list[str]) -> dict[str, tuple[str, int]]:
    """`NAME=ADDRESS:PORT` words (as a launcher takes them) as pins; `ValueError` on a bad one."""
    pins: dict[str, tuple[str, int]] = {}
    for word in words:
        name, _, target = word.partition("=")
        address, _, port = target.rpartition(":")
        if not name or not address or not port.isdigit():
            raise ValueError(f"{word!r}: expected NAME=ADDRESS:PORT")
        pins[name.lower()] = (address, int(port))
    return pins
