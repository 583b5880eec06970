"""Host side of desktops: the guest-protocol client, providers, the pool and task setup steps."""
