"""The `cua-rl` command line: the only package that imports click.

One module per top-level verb (one per benchmark under `bench/`), each thin: it
parses options, calls the domain API and prints. Domain packages never import it.
"""

from cua_rl.cli.root import cli, main

__all__ = ["cli", "main"]
