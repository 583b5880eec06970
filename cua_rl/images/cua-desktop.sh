#!/bin/sh
# cua-desktop: one desktop session in a cua-rl image (container or VM).
# Starts Xvfb, openbox and the guest server as the unprivileged `user`.
# The guest token comes from, in order: $CUA_GUEST_TOKEN, the kernel command
# line (cua_guest_token=...), the metadata file $CUA_RUN_DIR/token.
# The guest listens on $CUA_GUEST_LISTEN: `unix:PATH` (containers: a socket in
# the bind-mounted run dir, forwarded to 127.0.0.1 on the host), `fd:3` (the
# same socket, bound by the container's root init and inherited) or
# `tcp:HOST:PORT` (VMs: reached through QEMU's host forward). With
# CUA_CDP_LISTEN=fd:4 (containers) the inherited socket on descriptor 4 is piped
# to Chromium's DevTools port 9222 inside, which the host reaches through it.
# The session matches a local desktop's (docs/osworld-local.md): the desktop's
# own commands first on PATH (sudo, python, google-chrome, code), the session bus
# also at OSWorld's /run/user/1000/bus, the same environment.
set -eu

RUN_DIR=${CUA_RUN_DIR:-/run/cua}
W=${CUA_SCREEN_WIDTH:-1920}
H=${CUA_SCREEN_HEIGHT:-1080}
RUNTIME=/tmp/runtime-user
BUS=$RUNTIME/bus
OSWORLD_BUS=/run/user/1000/bus

osworld_bus_link() {
  # OSWorld's image has the session bus in uid 1000's runtime dir; tasks start
  # gnome-terminal or gsettings with DBUS_SESSION_BUS_ADDRESS=unix:path= that.
  # Root makes the link (root's, so the agent cannot move it) to the session's bus.
  mkdir -p "${OSWORLD_BUS%/*}" && ln -sfn "$BUS" "$OSWORLD_BUS" || true
}

if [ "$$" = 1 ]; then
  # Booted as a VM's init (the initramfs moved /proc, /sys, /dev, /run here or
  # not): nothing may fail fatally, since PID 1 exiting panics the kernel.
  set +e
  mkdir -p /proc /sys /dev /run /tmp
  mountpoint -q /proc || mount -t proc proc /proc
  mountpoint -q /sys || mount -t sysfs sys /sys
  mountpoint -q /dev || mount -t devtmpfs dev /dev
  mkdir -p /dev/pts /dev/shm
  mountpoint -q /dev/pts || mount -t devpts devpts /dev/pts
  mountpoint -q /dev/shm || mount -t tmpfs -o mode=1777 shm /dev/shm
  mountpoint -q /run || mount -t tmpfs -o mode=755 run /run
  mountpoint -q /tmp || mount -t tmpfs -o mode=1777 tmp /tmp
  mount -o remount,rw /
  hostname cua-desktop 2>/dev/null
  modprobe virtio_net 2>/dev/null
  ip link set lo up
  ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
  mkdir -p "$RUN_DIR" && chown user:user "$RUN_DIR"
  osworld_bus_link
  for arg in $(cat /proc/cmdline); do
    case "$arg" in cua_guest_token=*) echo "${arg#cua_guest_token=}" > "$RUN_DIR/token";; esac
  done
  chown user:user "$RUN_DIR/token" 2>/dev/null; chmod 600 "$RUN_DIR/token" 2>/dev/null
  export CUA_GUEST_LISTEN=${CUA_GUEST_LISTEN:-tcp:0.0.0.0:5000}
  # PID 1 must never exit (a kernel panic): run the session as `user`, reap, halt.
  setpriv --reuid=user --regid=user --init-groups env -i PATH=/usr/local/bin:/usr/bin:/bin \
    HOME=/home/user USER=user CUA_RUN_DIR="$RUN_DIR" CUA_GUEST_LISTEN="$CUA_GUEST_LISTEN" \
    "$0"
  echo "cua-desktop: the session exited ($?); powering off" > /dev/console
  echo o > /proc/sysrq-trigger 2>/dev/null
  while :; do sleep 3600; done
fi

if [ "$(id -u)" = 0 ]; then
  # A container started as root (with CAP_SETUID/CAP_SETGID only): the root init
  # binds guest.sock in the root-owned run dir, drops to `user` for good and runs
  # this script again with the socket as descriptor 3 (cua_guest/container_init.py).
  osworld_bus_link
  exec env PYTHONPATH=/opt/cua-guest/guest python3 -P -m cua_guest.container_init "$0"
fi

token=${CUA_GUEST_TOKEN:-}
if [ -z "$token" ] && [ -r /proc/cmdline ]; then
  for arg in $(cat /proc/cmdline); do
    case "$arg" in cua_guest_token=*) token=${arg#cua_guest_token=};; esac
  done
fi
if [ -z "$token" ] && [ -r "$RUN_DIR/token" ]; then token=$(cat "$RUN_DIR/token"); fi
if [ -z "$token" ]; then
  echo "cua-desktop: no guest token: set CUA_GUEST_TOKEN, boot with cua_guest_token=..., or write $RUN_DIR/token" >&2
  exit 2
fi
unset CUA_GUEST_TOKEN

export DISPLAY=:0 HOME=${HOME:-/home/user} XDG_RUNTIME_DIR=$RUNTIME
# What a local desktop's session gets (cua_rl/desktop/providers/local/sandbox.py,
# sandbox_env): toolkits export their widgets to AT-SPI only when asked to.
export PATH=/usr/local/lib/cua-rl/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin \
  LANG=${LANG:-C.UTF-8} SAL_USE_VCLPLUGIN=${SAL_USE_VCLPLUGIN:-gtk3} USER=user LOGNAME=user \
  SHELL=/bin/bash TMPDIR=/tmp XDG_CONFIG_HOME=$HOME/.config XDG_DATA_HOME=$HOME/.local/share \
  XDG_CACHE_HOME=$HOME/.cache GNOME_ACCESSIBILITY=1 QT_ACCESSIBILITY=1 \
  QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 DBUS_SESSION_BUS_ADDRESS=unix:path=$BUS
# Containers: the home is an empty size-capped tmpfs (the root is read-only); fill
# it from the image's copy. A home that has files (a VM's, on its disk) is left as is.
if [ -d /usr/local/share/cua-rl/home ] && [ -z "$(ls -A "$HOME")" ]; then
  cp -R --preserve=mode,timestamps /usr/local/share/cua-rl/home/. "$HOME"/
fi
export PYTHONPATH=/opt/cua-guest/guest:/opt/cua-guest/site
mkdir -p "$XDG_RUNTIME_DIR" /tmp/.X11-unix /tmp/.ICE-unix && chmod 700 "$XDG_RUNTIME_DIR"
cd "$HOME"

# `3>&- 4>&-`: the inherited listening sockets (fd:3 the guest's, fd:4 DevTools')
# go to their own processes only.
Xvfb :0 -screen 0 "${W}x${H}x24" -nolisten tcp -ac >/tmp/xvfb.log 2>&1 3>&- 4>&- &
i=0
until xdpyinfo >/dev/null 2>&1 3>&- 4>&-; do
  i=$((i + 1))
  if [ "$i" -gt 300 ]; then echo "cua-desktop: Xvfb did not start" >&2; cat /tmp/xvfb.log >&2; exit 1; fi
  sleep 0.05
done
# One D-Bus session for the window manager, the apps and AT-SPI, at a fixed path
# (the link at $OSWORLD_BUS points here).
dbus-daemon --session --nofork --nopidfile --address="unix:path=$BUS" \
  >/tmp/dbus.log 2>&1 3>&- 4>&- &
i=0
until [ -S "$BUS" ]; do
  i=$((i + 1))
  if [ "$i" -gt 400 ]; then echo "cua-desktop: the session bus did not start" >&2; cat /tmp/dbus.log >&2; exit 1; fi
  sleep 0.05
done

case "${CUA_GUEST_LISTEN:-unix:$RUN_DIR/guest.sock}" in
  unix:*) sock=${CUA_GUEST_LISTEN#unix:}; sock=${sock:-$RUN_DIR/guest.sock}
          rm -f "$sock"; listen="--unix-socket $sock" ;;
  fd:3) listen="--listen-fd 3" ;;
  # VMs: the only way in is QEMU's user-mode network (restrict=on) forwarding
  # one port from the host's 127.0.0.1, so plain HTTP crosses host loopback only.
  tcp:*) hp=${CUA_GUEST_LISTEN#tcp:}
         listen="--host ${hp%:*} --port ${hp##*:} --allow-plain-http" ;;
  *) echo "cua-desktop: CUA_GUEST_LISTEN must be unix:PATH, fd:3 or tcp:HOST:PORT" >&2; exit 2 ;;
esac

umask 077
printf '%s' "$token" > /tmp/.guest-token
umask 022
openbox >/tmp/openbox.log 2>&1 3>&- 4>&- &
if [ "${CUA_CDP_LISTEN:-}" = fd:4 ]; then
  python3 -m cua_guest.fd_forward 4 127.0.0.1 9222 >/tmp/cdp-forward.log 2>&1 3>&- &
fi
unset CUA_CDP_LISTEN
# shellcheck disable=SC2086
exec python3 -m cua_guest $listen --token-file /tmp/.guest-token 4>&-
