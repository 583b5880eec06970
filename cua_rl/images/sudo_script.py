"""The desktop's `sudo`: no root, and OSWorld's setup steps still run.

OSWorld's image gives `user` sudo with the password `password`, and some tasks'
setups use it only to install a tool the task needs (`sudo -S apt install jq -y`,
`unzip`, `sysstat`, `xsel`) or to create a folder in the home (`sudo -S mkdir
~/Desktop/todo_list_Jan_1`). Our desktops never grant root: a local desktop's
root in its namespaces would open kernel paths the sandbox keeps shut, and a
container or VM desktop runs as `user` with no way back (docs/sandbox.md). So the
desktop's `sudo` is `SUDO_SCRIPT`, first on PATH, on every provider that runs our
session (local desktops: `local.sudo`; images: `images.build`):

- `-S` reads one line (the password) from stdin, as sudo does, so it does not
  reach the command; any password is accepted (there is nothing to protect);
- `apt`/`apt-get update` succeeds doing nothing; `install PKG...` succeeds when
  the desktop has every package (its package database: the host's, bound
  read-only into a local desktop, or the image's own) and fails with apt's exit
  code 100 naming the missing ones otherwise; other apt commands fail;
- anything else runs as `user`: it works where the user may do it (the home,
  /tmp) and fails with the usual "Permission denied" where only root could.

So a folder made by `sudo mkdir` belongs to `user`, not root (the tasks that do
it only rename or list it). `cua-rl tasks check` counts a task whose setup needs
more than this as `needs_root` (`tasks.rootless_sudo`). Stdlib only: the local
session launcher imports this.
"""

from __future__ import annotations

SUDO_SCRIPT = r"""#!/bin/sh
# sudo on a cua-rl desktop: no root; see cua_rl/images/sudo_script.py
password_on_stdin=0
while [ $# -gt 0 ]; do
  case "$1" in
    -S|--stdin) password_on_stdin=1; shift ;;
    -E|-H|-k|-n|--preserve-env|--set-home|--reset-timestamp|--non-interactive) shift ;;
    --) shift; break ;;
    -*) echo "sudo: option $1: this desktop has no root (cua-rl desktop)" >&2; exit 1 ;;
    *) break ;;
  esac
done
[ "$password_on_stdin" = 1 ] && read -r _ignored
[ $# -gt 0 ] || { echo "usage: sudo [-S] command [arg ...]" >&2; exit 1; }
case "${1##*/}" in
  apt|apt-get)
    tool=$1; shift
    sub=""; packages=""
    for word in "$@"; do
      case "$word" in
        -*) ;;
        *) if [ -z "$sub" ]; then sub=$word; else packages="$packages $word"; fi ;;
      esac
    done
    case "$sub" in
      update) echo "(no root on this desktop: the package lists are the desktop's own)"; exit 0 ;;
      install)
        missing=""
        for package in $packages; do
          dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing="$missing $package"
        done
        if [ -n "$missing" ]; then
          echo "E: no root on this desktop to install:$missing" >&2; exit 100
        fi
        echo "$packages: already installed"; exit 0 ;;
      *) echo "E: $tool $sub needs root, which this desktop does not have" >&2; exit 100 ;;
    esac ;;
esac
exec "$@"
"""
"""The desktop's `sudo` (a POSIX sh script; see the module docstring)."""
