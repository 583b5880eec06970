"""Command line: `python -m cua_guest --host H --port P [--token-file F] [--no-auth]`
(or `--unix-socket PATH` instead of --host/--port: container desktops have no network).

Kept thin: parse, configure logging (warnings only by default), load the token
or refuse to start, and serve until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from cua_guest.auth import TOKEN_ENV, TokenError, load_token


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
    if not os.environ.get("DISPLAY"):
        logging.warning("DISPLAY is not set; screen routes will fail until it is")

    from aiohttp import web  # late: keeps --help fast

    from cua_guest.app import build_app

    app = build_app(token, args.act_timeout)
    where = {"path": args.unix_socket} if args.unix_socket else {
        "host": args.host, "port": args.port}
    web.run_app(app, **where, access_log=None, print=None, handle_signals=True)
