#!/usr/bin/env bash
# One-command setup for a fresh Debian/Ubuntu machine (run as root or with sudo):
# the local desktop stack (Xvfb, a window manager, the apps tasks use) and the
# Python packages of every role. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PACKAGES=(
  # the desktop itself
  xvfb openbox xdotool wmctrl x11-utils xauth util-linux procps xdg-utils
  # accessibility tree (/accessibility, /terminal) needs AT-SPI on a D-Bus session
  at-spi2-core dbus python3-pyatspi
  # apps the local task suite drives
  libreoffice-calc libreoffice-writer libreoffice-impress mousepad chromium gimp vlc python3-tk
  # evaluator metrics: OCR and audio/video decoding
  tesseract-ocr ffmpeg
  # qcow2 overlays of the qemu provider (and its tests)
  qemu-utils
  # fonts so screenshots have real text
  fonts-dejavu-core
)
if ! dpkg -s "${APT_PACKAGES[@]}" >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${APT_PACKAGES[@]}"
fi

PIP="python3 -m pip"
# torch first and pinned: a bare `torch` requirement would pull a multi-GB build.
$PIP install -q torch==2.14.1 torchvision==0.29.1
$PIP install -q -e ./vm/guest -e ".[train,dev]"
echo "cua-rl setup done: try 'cua-rl --help'"
