"""manifest.json of an evaluation run: what ran, precisely enough to run it again and
to name what differs (`cua-rl eval --like`, `cua-rl runs compare`).

`build` assembles the sections (`model`, `agent`, `desktops`, `tasks`, `code`);
`files` reads and writes the file and records each invocation; `differences`
names what differs between two manifests; `summary` is report.md's "What ran".
"""
