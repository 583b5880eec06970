"""`python -m cua_guest` runs the guest server."""

from cua_guest.main import main

main()
