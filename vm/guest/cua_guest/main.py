"""Command line: `python -m cua_guest --host H --port P [--token-file F] [--no-auth]`
(or `--listen-fd N`: serve on an inherited listening socket, as local desktops do)
(or `--unix-socket PATH` instead of --host/--port: container desktops have no network).

Kept thin: parse, configure logging (warnings only by default), load the token
and the TLS pair or refuse to start, and serve until SIGINT/SIGTERM. A
non-loopback address over plain HTTP is refused unless asked for explicitly:
the bearer token would cross the network in the clear.
"""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys
from pathlib import Path

from cua_guest.auth import TOKEN_ENV, TokenError, load_token
from cua_guest.limits import (
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_RECORD_FPS,
    DEFAULT_RECORD_MAX_S,
    GuestLimits,
)
from cua_guest.tls import (
    TlsError,
    ensure_self_signed,
    is_loopback,
    server_context,
    write_fingerprint,
)

MAX_UPLOAD_ENV = "CUA_GUEST_MAX_UPLOAD_BYTES"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cua-guest",
        description="Guest server for a cua-rl desktop: OSWorld's guest HTTP protocol plus "
        "POST /act and fast GET /screenshot. Uses the X display in $DISPLAY.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="port to bind (default 5000)")
    parser.add_argument(
        "--unix-socket",
        help="listen on this Unix socket instead of --host/--port (a container desktop with "
        "no network, its socket forwarded to 127.0.0.1 by the host)",
    )
    parser.add_argument(
        "--listen-fd",
        type=int,
        help="serve on this inherited listening socket instead (a local desktop: the launcher "
        "binds it where nothing inside can reach the path; the guest then turns non-dumpable "
        "so no other process of the desktop user can copy the descriptor)",
    )
    parser.add_argument(
        "--token-file", help=f"file holding the bearer token (else ${TOKEN_ENV} is used)"
    )
    parser.add_argument(
        "--no-auth", action="store_true", help="accept requests without a token (trusted use only)"
    )
    parser.add_argument(
        "--act-timeout",
        type=float,
        default=10.0,
        help="default seconds a POST /act may run before its worker is replaced (default 10)",
    )
    parser.add_argument(
        "--max-upload-bytes",
        type=int,
        default=int(os.environ.get(MAX_UPLOAD_ENV) or DEFAULT_MAX_UPLOAD_BYTES),
        help="largest file /setup/upload or /setup/download_file may write; more is HTTP 413 "
        f"(default ${MAX_UPLOAD_ENV} or {DEFAULT_MAX_UPLOAD_BYTES})",
    )
    parser.add_argument(
        "--record-max-seconds",
        type=float,
        default=DEFAULT_RECORD_MAX_S,
        help="a screen recording stops by itself after this many seconds "
        f"(default {DEFAULT_RECORD_MAX_S:g})",
    )
    parser.add_argument(
        "--record-fps",
        type=int,
        default=DEFAULT_RECORD_FPS,
        help=f"frames per second of screen recordings (default {DEFAULT_RECORD_FPS})",
    )
    parser.add_argument("--tls-cert", help="PEM certificate (chain) to serve HTTPS with")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--tls-self-signed",
        metavar="DIR",
        help="serve HTTPS with a self-signed pair kept in DIR (made on first start); "
        "its SHA-256 fingerprint is printed and written to DIR/guest.sha256 for pinning",
    )
    parser.add_argument(
        "--allow-plain-http",
        action="store_true",
        help="allow a non-loopback --host without TLS (the token then crosses the network "
        "in the clear: only on a network you fully trust)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default WARNING)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    if args.act_timeout <= 0:
        sys.exit("cua-guest: --act-timeout must be a positive number of seconds")
    try:
        token = load_token(args.token_file, args.no_auth)
    except TokenError as exc:
        sys.exit(f"cua-guest: refusing to start: {exc}")
    if args.max_upload_bytes <= 0 or args.record_max_seconds <= 0 or not 1 <= args.record_fps <= 60:
        sys.exit(
            "cua-guest: --max-upload-bytes and --record-max-seconds must be positive, "
            "--record-fps between 1 and 60"
        )
    try:
        ssl_context = _tls(args)
    except TlsError as exc:
        sys.exit(f"cua-guest: refusing to start: {exc}")
    if ssl_context is None and not is_loopback(args.host) and not args.allow_plain_http:
        sys.exit(
            f"cua-guest: refusing to serve plain HTTP on {args.host}: the bearer token would "
            "cross the network in the clear; use --tls-cert/--tls-key or --tls-self-signed DIR "
            "(or --allow-plain-http on a network you fully trust)"
        )
    if not os.environ.get("DISPLAY"):
        logging.warning("DISPLAY is not set; screen routes will fail until it is")

    from aiohttp import web  # late: keeps --help fast

    from cua_guest.app import build_app

    limits = GuestLimits(
        max_upload_bytes=args.max_upload_bytes,
        record_max_s=args.record_max_seconds,
        record_fps=args.record_fps,
    )
    app = build_app(token, args.act_timeout, limits)
    where = _where(args)
    web.run_app(
        app, **where, ssl_context=ssl_context, access_log=None, print=None, handle_signals=True
    )


def _where(args: argparse.Namespace) -> dict:
    """`web.run_app`'s listening arguments: an inherited socket, a Unix path or host:port."""
    if args.listen_fd is not None:
        import socket

        from cua_guest.fd_forward import not_dumpable

        not_dumpable()
        sock = socket.socket(fileno=args.listen_fd)
        sock.set_inheritable(False)
        return {"sock": sock}
    if args.unix_socket:
        return {"path": args.unix_socket}
    return {"host": args.host, "port": args.port}


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The server SSL context from the TLS options, or None for plain HTTP."""
    if args.tls_self_signed and (args.tls_cert or args.tls_key):
        raise TlsError("give either --tls-self-signed or --tls-cert/--tls-key, not both")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise TlsError("--tls-cert and --tls-key go together")
    if args.tls_self_signed:
        cert, key = ensure_self_signed(Path(args.tls_self_signed))
    elif args.tls_cert:
        cert, key = Path(args.tls_cert), Path(args.tls_key)
    else:
        return None
    context, fingerprint = server_context(cert, key)
    written = write_fingerprint(cert, fingerprint)
    # One line on stdout the host (or whoever starts the guest) can read and pin.
    print(f"cua-guest TLS certificate sha256 fingerprint: {fingerprint} ({written})", flush=True)
    return context
