# Shared by Scripts/run and Scripts/test (Scripts/bench is Python and builds on its own):
# installing what is missing, building, and unmounting for sure. Source it: it sets
# COORDFS_ROOT (the repository) and defines functions, and runs nothing.

COORDFS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

say() { printf '%s\n' "$*" >&2; }

# Installs the Debian packages among "$@" that are not installed yet (apt-get update once).
install_missing_packages() {
    local missing=()
    local package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# What building and mounting need.
install_build_dependencies() {
    # libpq5: loaded at run time by `coordfs mount --cluster` only (Sources/CLibPQ).
    # libsqlite3-dev: the version store's index (GRDB, Sources/CoordFSVersions).
    install_missing_packages libfuse3-dev fuse3 pkg-config libpq5 libsqlite3-dev
}

# Builds coordfs and coordfs-full beside it (debug unless $1 is "release") and prints coordfs's path.
build_coordfs() {
    local configuration="${1:-debug}"
    (cd "$COORDFS_ROOT" && swift build -c "$configuration" --product coordfs-full >&2 && swift build -c "$configuration" --product coordfs >&2)
    printf '%s\n' "$COORDFS_ROOT/.build/$configuration/coordfs"
}

# Unmounts $1 however it takes: coordfs unmount, fusermount3 -u, then a lazy umount.
force_unmount() {
    local mountpoint="$1"
    mountpoint -q "$mountpoint" 2>/dev/null || return 0
    fusermount3 -u "$mountpoint" 2>/dev/null || umount "$mountpoint" 2>/dev/null || umount -l "$mountpoint" 2>/dev/null || true
}
