#!/bin/sh
# in_root.sh ROOT COMMAND [ARG...]: run COMMAND in the root folder ROOT (made by scripts/gui_root.sh) as if on the
# host: the host's /tmp, /proc, /dev, /sys, the working directory and the folders in HERMES_IN_ROOT_BIND (colon-
# separated; one that is gone is skipped) at the same paths, in a private mount namespace. Every step execs the
# next (no fork), so the caller's child pid is COMMAND's own pid. scripts/gui_root.sh keeps a copy beside the root.
set -e
if [ -z "${HERMES_IN_ROOT_NAMESPACE:-}" ]; then
  as_root=""
  [ "$(id -u)" -eq 0 ] || as_root="--map-root-user"  # a user namespace lets anyone mount and chroot in it
  HERMES_IN_ROOT_NAMESPACE=1 exec unshare --mount --propagation private $as_root "$0" "$@"
fi
root=$1
shift
old_ifs=$IFS
IFS=:
set -f
for dir in /tmp /proc /dev /sys "${TMPDIR:-/tmp}" "$PWD" ${HERMES_IN_ROOT_BIND:-}; do
  case "$dir" in
    "" | / | "$root" | "$root"/*) continue ;;  # never the whole host, nor the root inside itself
  esac
  [ -d "$dir" ] || continue
  if ! mountpoint -q "$root$dir"; then
    mkdir -p "$root$dir"
    mount --rbind "$dir" "$root$dir"
  fi
done
IFS=$old_ifs
set +f
exec chroot "$root" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec env PATH=/usr/local/bin:/usr/bin:/bin "$@"' \
  in_root "$PWD" "$@"
