"""`python -m cua_rl.cli`: the `cua-rl` command (subprocesses of a run start it so)."""

from cua_rl.cli.root import main

main()
