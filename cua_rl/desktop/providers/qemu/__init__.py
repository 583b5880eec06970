"""Desktops in QEMU virtual machines on this host (KVM when available, TCG otherwise)."""
