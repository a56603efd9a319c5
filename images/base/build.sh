#!/usr/bin/env bash
# Builds the local sandbox base image dreadnode/base:latest from Debian
# packages (no registry is needed, only deb.debian.org).
#
# Usage: images/base/build.sh [--force]
#
# - Does nothing when the image exists and was built from this recipe
#   (unless --force): the image carries the recipe's hash (this script and
#   the suite) in its label dev.dreadnode.recipe, so an image built by an
#   older recipe is rebuilt. The tag moves to the new image; containers of
#   the old one (running tests) keep it, untagged.
# - Quiet on success; on failure prints the captured log and exits non-zero.
# - Safe to run concurrently: a flock serialises builders, and the image is
#   re-checked after the lock is taken, so parallel test binaries build once.
# - Downloaded .debs are cached (DREADNODE_IMAGE_CACHE, default
#   ~/.cache/dreadnode/debootstrap) so a rebuild is mostly local work.
#
# Needs root (debootstrap creates device nodes and chowns files) and docker.
set -euo pipefail

IMAGE="${DREADNODE_BASE_IMAGE:-dreadnode/base:latest}"
SUITE="${DREADNODE_DEBIAN_SUITE:-bookworm}"
MIRROR="${DREADNODE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${DREADNODE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreadnode/debootstrap}"
LOCK="${DREADNODE_IMAGE_LOCK:-/tmp/dreadnode-image-build.lock}"
# python3-minimal lacks http.server's dependencies (email, html, ...); the
# full interpreter stdlib is ~10 MB more and makes the image useful.
# python-is-python3: `python`, which E2B's base has and its clients (and
# E2B's own tests) run.
PACKAGES="busybox,python3-minimal,libpython3.11-stdlib,python-is-python3,ca-certificates"
# What else E2B's base gives a client: pip, node and npm (Debian's own,
# installed by apt in the new root, without Recommends: debootstrap's
# resolver does not follow npm's alternatives).
APT_PACKAGES="python3-pip nodejs npm"

force=0
for arg in "$@"; do
	case "$arg" in
	--force) force=1 ;;
	-h | --help)
		sed -n '2,19p' "$0"
		exit 0
		;;
	*)
		echo "build.sh: unknown argument $arg" >&2
		exit 2
		;;
	esac
done

# The recipe's hash: this script (packages, users, import settings) and
# the suite it installs.
RECIPE="$({ cat "$0"; echo "$SUITE"; } | sha256sum | cut -c1-16)"

# have_image: the image exists and was built from this recipe.
have_image() {
	[ "$(docker image inspect --format '{{index .Config.Labels "dev.dreadnode.recipe"}}' "$IMAGE" 2>/dev/null)" = "$RECIPE" ]
}

if [ "$force" = 0 ] && have_image; then exit 0; fi

# A fresh machine: install debootstrap from Debian's packages (root only).
if ! command -v debootstrap >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "build.sh: installing debootstrap (apt-get)" >&2
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null 2>&1 ||
		echo "build.sh: installing debootstrap failed" >&2
fi

for tool in docker debootstrap flock tar; do
	command -v "$tool" >/dev/null || {
		echo "build.sh: $tool is required (apt-get install debootstrap util-linux tar)" >&2
		exit 1
	}
done
if [ "$(id -u)" != 0 ]; then
	echo "build.sh: debootstrap needs root; run: sudo $0 $*" >&2
	exit 1
fi

exec 9>"$LOCK"
flock 9
# Another builder may have finished while we waited for the lock.
if [ "$force" = 0 ] && have_image; then exit 0; fi

mkdir -p "$CACHE"
work="$(mktemp -d /var/tmp/dreadnode-base.XXXXXX)"
log="$work.log"
trap 'rm -rf "$work" "$log"' EXIT
root="$work/rootfs"

fail() {
	echo "build.sh: $1 failed; log follows" >&2
	cat "$log" >&2
	exit 1
}

debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE" \
	"$SUITE" "$root" "$MIRROR" >"$log" 2>&1 || fail debootstrap

# apt's downloads go to the same cache (bind-mounted, unmounted on exit).
mkdir -p "$CACHE/apt" "$root/var/cache/apt/archives"
mount --bind "$CACHE/apt" "$root/var/cache/apt/archives"
trap 'umount "$root/var/cache/apt/archives" 2>/dev/null || true; rm -rf --one-file-system "$work" "$log"' EXIT
{ chroot "$root" apt-get update -qq &&
	DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends $APT_PACKAGES; } >>"$log" 2>&1 ||
	fail "apt-get install $APT_PACKAGES"
umount "$root/var/cache/apt/archives"

# busybox applets the base lacks (wget, nc, ...), without shadowing real tools.
for applet in wget nc ps ip netstat vi less; do
	if ! chroot "$root" sh -c "command -v $applet" >/dev/null 2>&1; then
		ln -s /bin/busybox "$root/usr/local/bin/$applet"
	fi
done

# What E2B's clients assume of a sandbox: bash (Essential, so minbase has
# it) and a user "user" (uid 1000) with /home/user, whom E2B's SDKs run
# commands as (E2B's clients name it). The image's default user stays
# root and its working directory /root: the native API's contract runs a
# sandbox's commands as the image's user, and the provider's own helpers
# (the route and disk helpers) run this image as root.
[ -x "$root/bin/bash" ] || fail "bash check (minbase without bash)"
chroot "$root" useradd --create-home --uid 1000 --user-group --shell /bin/bash user >>"$log" 2>&1 || fail "useradd user"

# Trim what a sandbox never needs; keeps the import (and every layer copy) small.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
	"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
	"$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/dev/*

tar --numeric-owner -C "$root" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'WORKDIR /root' \
	--change 'LABEL dev.dreadnode.image=base' \
	--change "LABEL dev.dreadnode.recipe=$RECIPE" \
	--change 'CMD ["sleep","infinity"]' \
	- "$IMAGE" >>"$log" 2>&1 || fail "docker import"
