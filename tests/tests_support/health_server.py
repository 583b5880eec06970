"""A stand-in model server for port tests: `python health_server.py HOST PORT`.

Answers GET /health like `cua-rl serve` and binds its port the same way (aiohttp's
`run_app`, SO_REUSEADDR), so a port taken by another socket makes it exit with the
same "address already in use" a real replica prints, in a fraction of the time.
"""

from __future__ import annotations

import sys

from aiohttp import web


async def health(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "version": 0})


def main() -> None:
    app = web.Application()
    app.router.add_get("/health", health)
    web.run_app(app, host=sys.argv[1], port=int(sys.argv[2]), print=None)


if __name__ == "__main__":
    main()
