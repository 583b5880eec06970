"""Desktop images built from Debian packages (`cua-rl image build`).

One recipe (`recipe`) names the Debian packages, the guest and its Python
dependencies; `build` turns it into a root file system with mmdebstrap and then
into a docker image or a bootable qcow2; the resolved package versions go into
the image's manifest and its content hash, under which images are cached.
"""
