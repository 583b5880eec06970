"""cua-guest: the server inside each cua-rl desktop (OSWorld's guest protocol + /act)."""

__version__ = "0.1.0"
