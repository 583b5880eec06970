"""Desktops on this host: an Xvfb display per desktop, each in a bubblewrap sandbox
under its own user and cgroup."""
