#!/bin/sh
# Build the Debian base image from the Debian package mirror, for machines that reach the
# mirror but no image registry: debootstrap a minimal bookworm and import it as
# debian:bookworm-slim, the image the Dockerfiles start FROM. Elsewhere `docker compose
# build` simply pulls debian:bookworm-slim and this script is not needed.
# Needs root and the Debian package debootstrap.
set -eu
IMAGE=${IMAGE:-debian:bookworm-slim}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "make-base: $IMAGE already exists"
    exit 0
fi
command -v debootstrap >/dev/null || apt-get install -y --no-install-recommends debootstrap
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" "$MIRROR"
# The same sources as the official image (and as the host's packages): bookworm, its
# updates and its security updates, so images get the same server versions as `local`.
rm -f "$root/etc/apt/sources.list"
cat > "$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
tar -C "$root" -c . | docker import --change 'CMD ["bash"]' - "$IMAGE"
echo "make-base: imported $IMAGE"
