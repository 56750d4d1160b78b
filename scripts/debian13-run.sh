#!/usr/bin/env bash
# Runs a command inside the Debian 13 root (scripts/debian13-root.sh) with
# /proc, /sys, /dev and /dev/shm mounted (the CPU plugin reads
# /proc/cpuinfo, Open MPI's hwloc reads the CPU topology in /sys and wants
# /dev/shm), and unmounts them after.
#   debian13-run.sh COMMAND [ARGS...]      e.g. debian13-run.sh /build/launcher/polyhal devices
# DEBIAN13_ROOT=DIR runs it in another root (the autopkgtests' fresh one).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${DEBIAN13_ROOT:-$(scripts/debian13-root.sh)}
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
for fs in proc sys dev dev/shm; do
  if ! mountpoint -q "$root/$fs"; then
    if [ "$fs" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind "/$fs" "$root/$fs"; fi
    mounted+=("$root/$fs")
  fi
done
chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  ${OMP_NUM_THREADS:+OMP_NUM_THREADS=$OMP_NUM_THREADS} "$@"
