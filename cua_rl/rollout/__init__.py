"""Actors, the fleet and its scheduler: episodes on desktops with a policy pool."""
