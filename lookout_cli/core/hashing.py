"""SHA-256 for lookout's keys, digests and sealed files: Python's own (``_sha256``) while a
process has hashed under a megabyte, OpenSSL's (``hashlib``) from the call that passes it on.
Both give the same digests; OpenSSL's uses the CPU's SHA instructions (four times as fast over
a long session's lines) but loading it costs 13 M instructions, a thirtieth of a prompt's
measure, which hashes a few lines and a small memo. A hash object made empty (to be fed as a
file is written) is the one in use then: OpenSSL's once a run has hashed much."""

from __future__ import annotations

try:
    from _sha256 import sha256 as _own
except ImportError:  # pragma: no cover - a Python without it
    from hashlib import sha256 as _own

OWN_BYTES = 1 << 20  # hashed with Python's own before OpenSSL's is loaded
EXPECTED_BYTES = 1 << 19  # told this much is coming (``expect``), OpenSSL's at once: its load
# costs what Python's own takes to hash about 0.6 MB
_hashed = 0
_openssl = None


def sha256(data: bytes = b"", more: bytes = b""):
    """``hashlib.sha256(data + more)``: ``more`` (a long text after a short head, say) is fed
    as it is, not copied into one value with ``data``."""
    global _hashed, _openssl
    make = _openssl
    if make is None:
        _hashed += len(data) + len(more)
        if _hashed <= OWN_BYTES:
            make = _own
        else:
            import hashlib

            make = _openssl = hashlib.sha256
    hasher = make(data)
    if more:
        hasher.update(more)
    return hasher


def expect(size: int) -> None:
    """A run about to hash ``size`` bytes (lines it has yet to read): OpenSSL's from the first
    byte when that is much (``EXPECTED_BYTES``)."""
    global _openssl
    if _openssl is None and size >= EXPECTED_BYTES:
        import hashlib

        _openssl = hashlib.sha256
