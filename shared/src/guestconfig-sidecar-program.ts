/**
 * The `kd-guestconfig` sidecar's program: a POSIX shell script run by busybox in the sidecar image
 * (test/images builds the image with it at SIDECAR_PROGRAM). Pure text here so that the image builder
 * and a unit test that runs it against simulated kubelet volumes use the same bytes.
 *
 * What it does, in a loop:
 *  - when the `..data` symlink of the private Secret volume changes (the kubelet swaps it atomically):
 *    with both keys present, installs .platform.json then .priv_configmeta.json (0600, root) by atomic
 *    swap; without them, removes both;
 *  - when the `..data` symlink of the downward-API volume changes and the projected document is
 *    non-empty: swaps configmeta.json (0644) in, unless it is byte-identical, then writes the generator
 *    file. It reads both items from the timestamped directory `..data` points to, so the two always come
 *    from one kubelet update. An empty annotation keeps the last document: the file is never empty.
 * Every write goes to a temporary file in the same directory and is renamed over the target, so a reader
 * sees the old or the new file, never a partial one. A readlink of each volume every round would start
 * processes all the time; instead each round compares the link with the directory last handled
 * (`test -ef`, a shell builtin) and waits with a builtin read timeout, so an idle round starts no
 * process. 0.3 s keeps delivery well under the kubelet's own update delay.
 */
import {
  CONFIGMETA_FILE,
  GENERATOR_FILE,
  GUESTCONFIG_DIR,
  PLATFORM_FILE,
  PRIVATE_CONFIGMETA_FILE,
  PRIVATE_SECRET_KEY_CONFIGMETA,
  PRIVATE_SECRET_KEY_PLATFORM,
  SIDECAR_PRIVATE_DIR,
  SIDECAR_SOURCE_DIR,
  SOURCE_GENERATOR_ITEM,
  TOOLS_DIR,
} from './guestconfig-layout.js';

/** Seconds between two looks at the volumes' `..data` links. */
export const SIDECAR_POLL_SECONDS = '0.3';

export function sidecarProgram(): string {
  return `#!/bin/sh
# kd-guestconfig: keeps ${GUESTCONFIG_DIR}/${CONFIGMETA_FILE} equal to the pod's configmeta annotation.
# Paths come from the environment only so that tests can run it outside a pod.
set -u
src=\${KD_SOURCE_DIR:-${SIDECAR_SOURCE_DIR}}
priv=\${KD_PRIVATE_DIR:-${SIDECAR_PRIVATE_DIR}}
dir=\${KD_GUESTCONFIG_DIR:-${GUESTCONFIG_DIR}}
tools=\${KD_TOOLS_DIR-${TOOLS_DIR}}
poll=\${KD_POLL_SECONDS:-${SIDECAR_POLL_SECONDS}}
umask 077
trap 'exit 0' TERM INT

# The seed init containers run the app's image, which may have no shell: they run this static busybox.
if [ -n "$tools" ]; then
  cp /bin/busybox "$tools/.busybox.tmp" && chmod 0755 "$tools/.busybox.tmp" && mv -f "$tools/.busybox.tmp" "$tools/busybox" ||
    echo "kd-guestconfig: could not copy busybox to $tools" >&2
fi

# swap NAME MODE FILE: FILE becomes $dir/NAME through a temporary file in $dir and a rename.
swap() {
  tmp="$dir/.$1.kd-tmp"
  rm -f "$tmp"
  if cp "$3" "$tmp" 2>/dev/null && chmod "$2" "$tmp" && mv -f "$tmp" "$dir/$1"; then return 0; fi
  rm -f "$tmp"
  return 1
}
# same FILE NAME: FILE equals $dir/NAME byte for byte.
same() { cmp -s "$1" "$dir/$2" 2>/dev/null; }
# changed VOLUME LAST: the volume's ..data no longer points where it pointed when LAST was handled
# (LAST "-": never handled; "": there was no ..data). Shell builtins only: no process per round.
changed() {
  if [ -e "$1/..data" ]; then [ "$2" = - ] || [ -z "$2" ] || ! [ "$1/..data" -ef "$1/$2" ]; else [ -n "$2" ]; fi
}
# A pause without a process: busybox's read with a timeout on a private FIFO (in the tools emptyDir, the
# only writable place besides the delivered directory); sleep where that is not possible.
pause() { sleep "$poll"; }
if [ -n "$tools" ] && mkfifo "$tools/.tick" 2>/dev/null && exec 3<>"$tools/.tick"; then
  rm -f "$tools/.tick"
  pause() { read -t "$poll" -u 3 _ || true; }
fi

last=-
lastp=-
while :; do
  if changed "$priv" "$lastp"; then
    p=$(readlink "$priv/..data" 2>/dev/null) || p=
    pc="$priv/$p/${PRIVATE_SECRET_KEY_CONFIGMETA}"
    pl="$priv/$p/${PRIVATE_SECRET_KEY_PLATFORM}"
    if [ -n "$p" ] && [ -s "$pc" ] && [ -s "$pl" ]; then
      # The platform file first: configcli merges the private file only when both are there.
      if { same "$pl" ${PLATFORM_FILE} || swap ${PLATFORM_FILE} 0600 "$pl"; } &&
        { same "$pc" ${PRIVATE_CONFIGMETA_FILE} || swap ${PRIVATE_CONFIGMETA_FILE} 0600 "$pc"; }; then
        lastp=$p
        echo "kd-guestconfig: private files delivered"
      fi
    elif rm -f "$dir/${PRIVATE_CONFIGMETA_FILE}" "$dir/${PLATFORM_FILE}"; then
      lastp=$p
    fi
  fi
  if changed "$src" "$last"; then
    d=$(readlink "$src/..data" 2>/dev/null) || d=
    doc="$src/$d/${CONFIGMETA_FILE}"
    gen="$src/$d/${SOURCE_GENERATOR_ITEM}"
    if [ -z "$d" ] || [ ! -s "$doc" ]; then
      last=$d
    elif { same "$doc" ${CONFIGMETA_FILE} || swap ${CONFIGMETA_FILE} 0644 "$doc"; } &&
      { [ ! -f "$gen" ] || same "$gen" ${GENERATOR_FILE} || swap ${GENERATOR_FILE} 0644 "$gen"; }; then
      last=$d
      # $d names the kubelet's update (..YYYY_MM_DD_hh_mm_ss.N, UTC): how long the swap took after it.
      echo "kd-guestconfig: delivered generator $(cat "$dir/${GENERATOR_FILE}" 2>/dev/null) from $d"
    fi
  fi
  pause
done
`;
}
