"""Desktops in containers: the `container` provider (our own image, on docker or
podman) and the `docker` provider (OSWorld's QEMU-in-docker image)."""
