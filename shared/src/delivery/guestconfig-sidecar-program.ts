/**
 * The `kd-guestconfig` sidecar's program: a POSIX shell script run by busybox in the sidecar image
 * (test/images builds the image with it at SIDECAR_PROGRAM). Pure text here so that the image builder
 * and a unit test that runs it against simulated kubelet volumes use the same bytes.
 *
 * What it does, in a loop:
 *  - when the `..data` symlink of either volume changes (the kubelet swaps each atomically): installs
 *    .platform.json then .priv_configmeta.json (0600, root) by atomic swap when the Secret has both keys
 *    and its `version` is the one the pod's splice item names — the reconciler wrote both, so a Secret of
 *    that name that someone else made is never installed; removes both when the document names no
 *    private half; keeps the last ones while the two volumes disagree;
 *  - when the `..data` symlink of the downward-API volume changes and the projected document is
 *    non-empty: swaps configmeta.json (0644) in, unless it is byte-identical, then writes the generator
 *    file — in `private-file` mode only once the private files of the version the document names are in
 *    place, so a generator file always means the whole document (the reconnect hook runs on it). It reads both items from the timestamped directory `..data` points to, so the two always come
 *    from one kubelet update. An empty annotation keeps the last document: the file is never empty.
 *  - in `document` mode (KD_SECRET_DELIVERY, the default) the public document is KubeDirector's: when the
 *    splice item names a version, configmeta.json is the public text with the named byte ranges replaced
 *    by the private Secret's sections — only when the Secret's `version` is the same (the first delivery
 *    waits for it; a later mismatch keeps the last good document, never a mix);
 *  - it delivers into GUESTCONFIG_SUBPATH of the emptyDir (the receiving containers mount only that,
 *    by subPath), which it creates 0755 with its own owner before anything else of the pod starts; it
 *    never writes through a symlink nor over a file it did not write (another owner) and logs each;
 *  - the generator is also written to the emptyDir's root, where the reconnect hook reads it with
 *    `kubectl exec` in this container; beside it, ROSTER_FILE holds the roster digest of the document in
 *    place (plan-roster-changes.ts), written just before that generator copy.
 * Every write goes to a temporary file in the same directory and is renamed over the target, so a reader
 * sees the old or the new file, never a partial one. A readlink of each volume every round would start
 * processes all the time; instead each round compares the link with the directory last handled
 * (`test -ef`, a shell builtin) and waits with a builtin read timeout, so an idle round starts no
 * process. 0.3 s keeps delivery well under the kubelet's own update delay.
 */
import {
  CONFIGMETA_FILE,
  GUESTCONFIG_SUBPATH,
  PRIVATE_SECRET_KEY_VERSION,
  SOURCE_SPLICE_ITEM,
  GENERATOR_FILE,
  GUESTCONFIG_DIR,
  PLATFORM_FILE,
  PRIVATE_CONFIGMETA_FILE,
  PRIVATE_SECRET_KEY_CONFIGMETA,
  PRIVATE_SECRET_KEY_PLATFORM,
  SIDECAR_PRIVATE_DIR,
  SIDECAR_SOURCE_DIR,
  SOURCE_GENERATOR_ITEM,
  SOURCE_ROSTER_ITEM,
  ROSTER_FILE,
  TOOLS_DIR,
} from '../domain/guestconfig-layout.js';

/** Seconds between two looks at the volumes' `..data` links. */
export const SIDECAR_POLL_SECONDS = '0.3';

export function sidecarProgram(): string {
  return `#!/bin/sh
# kd-guestconfig: keeps ${GUESTCONFIG_DIR}/${CONFIGMETA_FILE} equal to the pod's configmeta annotation.
# Paths come from the environment only so that tests can run it outside a pod.
set -u
src=\${KD_SOURCE_DIR:-${SIDECAR_SOURCE_DIR}}
priv=\${KD_PRIVATE_DIR:-${SIDECAR_PRIVATE_DIR}}
root=\${KD_GUESTCONFIG_DIR:-${GUESTCONFIG_DIR}}
tools=\${KD_TOOLS_DIR-${TOOLS_DIR}}
poll=\${KD_POLL_SECONDS:-${SIDECAR_POLL_SECONDS}}
mode=\${KD_SECRET_DELIVERY:-document}
dir="$root/${GUESTCONFIG_SUBPATH}"
me=$(id -u)
umask 077
trap 'exit 0' TERM INT
log() { echo "kd-guestconfig: $*"; }

# The directory the app sees: ours, 0755, created before any other container of the pod starts (the seed
# may then give it the image's owner and mode). A symlink or a non-directory there is never used.
if [ -L "$dir" ] || { [ -e "$dir" ] && [ ! -d "$dir" ]; }; then
  log "refusing $dir: not a directory (a symlink or file someone planted); removing it"
  rm -f "$dir" || exit 1
fi
if [ ! -d "$dir" ]; then mkdir -m 0755 "$dir" || { log "cannot create $dir" >&2; exit 1; }; fi

# The seed init containers run the app's image, which may have no shell: they run this static busybox.
if [ -n "$tools" ]; then
  cp /bin/busybox "$tools/.busybox.tmp" && chmod 0755 "$tools/.busybox.tmp" && mv -f "$tools/.busybox.tmp" "$tools/busybox" ||
    echo "kd-guestconfig: could not copy busybox to $tools" >&2
fi

# ours NAME: $dir/NAME is absent, or a regular file (not a symlink) owned by this user.
ours() {
  t="$dir/$1"
  if [ -L "$t" ]; then log "refusing to replace $t: a symlink someone planted"; return 1; fi
  [ -e "$t" ] || return 0
  if [ ! -f "$t" ] || [ "$(stat -c %u "$t")" != "$me" ]; then
    log "refusing to replace $t: not a regular file written by kd-guestconfig (owner uid $(stat -c %u "$t"))"
    return 1
  fi
}
# swap NAME MODE FILE: FILE becomes $dir/NAME through a fresh temporary file in $dir and a rename.
swap() {
  ours "$1" || return 2
  tmp=$(mktemp "$dir/.kd-tmp.XXXXXX") || return 1
  if cat "$3" >"$tmp" && chmod "$2" "$tmp" && mv -f "$tmp" "$dir/$1"; then return 0; fi
  rm -f "$tmp"
  return 1
}
# same FILE NAME: FILE equals $dir/NAME byte for byte (and $dir/NAME is not a symlink).
same() { [ ! -L "$dir/$2" ] && cmp -s "$1" "$dir/$2" 2>/dev/null; }
put() { same "$3" "$1" || swap "$1" "$2" "$3"; }
# changed VOLUME LAST: the volume's ..data no longer points where it pointed when LAST was handled
# (LAST "-": never handled; "": there was no ..data). Shell builtins only: no process per round.
changed() {
  if [ -e "$1/..data" ]; then [ "$2" = - ] || [ -z "$2" ] || ! [ "$1/..data" -ef "$1/$2" ]; else [ -n "$2" ]; fi
}
# assemble DOC SPLICE PRIVDIR OUT: KubeDirector's document from the public text and the private sections
# of the same version; status 3 when the halves are of different versions (or the private half is missing),
# 4 when a private section is not of the size the annotation names.
assemble() {
  set -- "$1" "$2" "$3" "$4" $(cat "$2")
  doc=$1 pd=$3 out=$4
  shift 4
  [ "\${1:-}" = 1 ] || { log "splice item unreadable: $*"; return 1; }
  want=\${2:-}
  shift 2
  have=$(cat "$pd/${PRIVATE_SECRET_KEY_VERSION}" 2>/dev/null) || have=
  [ -n "$want" ] && [ "$want" = "$have" ] || return 3
  : >"$out" || return 1
  pos=0
  expect=$(wc -c <"$doc")
  while [ $# -ge 4 ]; do
    # A section of another size is not the one this version was written with: never joined.
    [ -f "$pd/$1.json" ] && [ "$(wc -c <"$pd/$1.json")" -eq "$4" ] || return 4
    tail -c +$((pos + 1)) "$doc" | head -c $(($2 - pos)) >>"$out" || return 1
    cat "$pd/$1.json" >>"$out" || return 1
    expect=$((expect - ($3 - $2) + $4))
    pos=$3
    shift 4
  done
  tail -c +$((pos + 1)) "$doc" >>"$out" || return 1
  # A short write (a full volume) is never delivered.
  [ "$(wc -c <"$out")" -eq "$expect" ] || { log "assembled document has the wrong size; not delivered"; return 1; }
}
# A pause without a process: busybox's read with a timeout on a private FIFO (in the tools emptyDir, the
# only writable place besides the delivered directory); sleep where that is not possible.
pause() { sleep "$poll"; }
if [ -n "$tools" ] && mkfifo "$tools/.tick" 2>/dev/null && exec 3<>"$tools/.tick"; then
  rm -f "$tools/.tick"
  pause() { read -t "$poll" -u 3 _ || true; }
fi
work="$root/.kd-assembled"

# install_private: the private files of the Secret's current update when the splice item of the document
# update $d names its version; none when that document has no private half; the last ones while the two
# disagree.
install_private() {
  p=$(readlink "$priv/..data" 2>/dev/null) || p=
  want=
  [ -z "$d" ] || [ ! -s "$src/$d/${SOURCE_SPLICE_ITEM}" ] || want=$(cut -d' ' -f2 "$src/$d/${SOURCE_SPLICE_ITEM}")
  if [ -z "$want" ]; then
    if [ -e "$dir/${PRIVATE_CONFIGMETA_FILE}" ] || [ -e "$dir/${PLATFORM_FILE}" ]; then
      ours ${PRIVATE_CONFIGMETA_FILE} && ours ${PLATFORM_FILE} && rm -f "$dir/${PRIVATE_CONFIGMETA_FILE}" "$dir/${PLATFORM_FILE}"
    fi
    pinst=
    return 0
  fi
  pc="$priv/$p/${PRIVATE_SECRET_KEY_CONFIGMETA}"
  pl="$priv/$p/${PRIVATE_SECRET_KEY_PLATFORM}"
  have=$(cat "$priv/$p/${PRIVATE_SECRET_KEY_VERSION}" 2>/dev/null) || have=
  [ -n "$p" ] && [ "$want" = "$have" ] && [ -s "$pc" ] && [ -s "$pl" ] || return 0
  same "$pl" ${PLATFORM_FILE} && same "$pc" ${PRIVATE_CONFIGMETA_FILE} && pinst=$want && return 0
  # The platform file first: configcli merges the private file only when both are there.
  put ${PLATFORM_FILE} 0600 "$pl" && put ${PRIVATE_CONFIGMETA_FILE} 0600 "$pc" && pinst=$want && log "private files delivered"
}
# private_behind SPLICE: in private-file mode, the document's private half (the version its splice item
# names) is not installed yet. The generator files then wait for it: they tell the reconnect hook (and
# anyone) that the whole document is in place.
private_behind() {
  [ "$mode" != document ] && [ -s "$1" ] && [ "$(cut -d' ' -f2 "$1")" != "$pinst" ]
}

last=-
lastp=-
waiting=
pinst=
while :; do
  pchanged=
  if changed "$priv" "$lastp"; then
    pchanged=1
    lastp=$(readlink "$priv/..data" 2>/dev/null) || lastp=
  fi
  schanged=
  if changed "$src" "$last"; then schanged=1; fi
  # One read of the document's link per round: the private files and the document follow the same update.
  if [ -n "$pchanged" ] || [ -n "$schanged" ]; then
    d=$(readlink "$src/..data" 2>/dev/null) || d=
    install_private
  fi
  if [ -n "$schanged" ] || { [ -n "$waiting" ] && [ -n "$pchanged" ]; }; then
    doc="$src/$d/${CONFIGMETA_FILE}"
    gen="$src/$d/${SOURCE_GENERATOR_ITEM}"
    spl="$src/$d/${SOURCE_SPLICE_ITEM}"
    ros="$src/$d/${SOURCE_ROSTER_ITEM}"
    last=$d
    waiting=
    if [ -z "$d" ] || [ ! -s "$doc" ]; then
      :
    else
      rc=0
      if [ "$mode" = document ] && [ -s "$spl" ]; then
        p=$(readlink "$priv/..data" 2>/dev/null) || p=
        assemble "$doc" "$spl" "$priv/$p" "$work" || rc=$?
        doc=$work
      fi
      if [ $rc = 4 ]; then
        waiting=1
        log "the private Secret's sections are not the size the annotation names (cut short or edited by hand); keeping the last document"
      elif [ $rc = 3 ]; then
        waiting=1
        log "waiting for the private Secret of version $(cut -d' ' -f2 "$spl") (it has $(cat "$priv/$p/${PRIVATE_SECRET_KEY_VERSION}" 2>/dev/null || echo none)); keeping the last document"
      elif [ $rc != 0 ]; then
        log "document of $d not delivered"
      elif private_behind "$spl"; then
        waiting=1
        put ${CONFIGMETA_FILE} 0644 "$doc" &&
          log "delivered the document of $d; its generator waits for the private files of version $(cut -d' ' -f2 "$spl")"
      elif put ${CONFIGMETA_FILE} 0644 "$doc" && { [ ! -f "$gen" ] || put ${GENERATOR_FILE} 0644 "$gen"; }; then
        # The roster digest before the generator: a reader that sees the new generator sees its roster.
        [ ! -s "$ros" ] || cmp -s "$ros" "$root/${ROSTER_FILE}" || { cp "$ros" "$root/.r.kd-tmp" && chmod 0644 "$root/.r.kd-tmp" && mv -f "$root/.r.kd-tmp" "$root/${ROSTER_FILE}"; }
        [ ! -f "$gen" ] || cmp -s "$gen" "$root/${GENERATOR_FILE}" || { cp "$gen" "$root/.g.kd-tmp" && chmod 0644 "$root/.g.kd-tmp" && mv -f "$root/.g.kd-tmp" "$root/${GENERATOR_FILE}"; }
        # $d names the kubelet's update (..YYYY_MM_DD_hh_mm_ss.N, UTC): how long the swap took after it.
        log "delivered generator $(cat "$dir/${GENERATOR_FILE}" 2>/dev/null) from $d"
      fi
      rm -f "$work"
    fi
  fi
  pause
done
`;
}
