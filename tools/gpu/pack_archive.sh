#!/usr/bin/env bash
# Turns a staged GPU pack into what travels to the GPU machine, and checks that the
# device call carrying it fits (docs/gpu.md, "Packing"). pack.sh calls it after staging;
# tools/gpu/device_check_test.sh runs it on a fake stage.
#
#   tools/gpu/pack_archive.sh STAGE PACK
#
# STAGE holds bin/, lib/, data/ and manifest.tsv. PACK (emptied first) gets
# manifest.tsv (the stage's, plus "# needs glibc" and "# archive" lines),
# device_check.sh with device_check_lib.sh, and pack.tar.xz: bin/, lib/ and data/ as
# one solid xz stream (the statically linked checks share most of their code, so one
# stream is several times smaller than the files). device_check.sh unpacks it with xz,
# or with python3's lzma where the GPU machine has no xz.
#
# The call carries the repository (tracked and untracked-but-not-ignored files:
# PACK_REPO_BYTES, else measured with git) plus PACK, within PACK_CALL_LIMIT_BYTES
# (default 64 MiB, the device tool's limit); the script fails, printing the sizes, when
# that leaves less than PACK_MARGIN_BYTES (default 2 MiB) to spare. It prints the sizes
# on every pack.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CALL_LIMIT_BYTES="${PACK_CALL_LIMIT_BYTES:-$((64 * 1024 * 1024))}"
MARGIN_BYTES="${PACK_MARGIN_BYTES:-$((2 * 1024 * 1024))}"
# Debian 12's libstdc++ asks for GLIBC_2.36: the floor when no packed file says more.
MIN_GLIBC=2.36

log() { printf '[pack] %s\n' "$*" >&2; }
die() { printf '[pack] error: %s\n' "$*" >&2; exit 1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# Bytes of what travels with the working tree: tracked and untracked-but-not-ignored
# files of the repository holding this script.
repo_bytes() {
  if [[ -n ${PACK_REPO_BYTES:-} ]]; then
    echo "$PACK_REPO_BYTES"
    return
  fi
  local root
  root="$(git -C "$HERE" rev-parse --show-toplevel)" || die "not in a git checkout: set PACK_REPO_BYTES"
  git -C "$root" ls-files -z --cached --others --exclude-standard |
    (cd "$root" && du -cb --files0-from=- 2>/dev/null) | awk 'END { print $1 }'
}

# The newest GLIBC_x.y symbol version any packed ELF file asks for, at least MIN_GLIBC.
needed_glibc() {
  local stage="$1"
  {
    echo "GLIBC_$MIN_GLIBC"
    find "$stage/bin" "$stage/lib" -type f -print0 |
      xargs -0 -r objdump -T 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u || true
  } | sed 's/^GLIBC_//' | sort -V | tail -n 1
}

main() {
  (($# == 2)) || die "usage: pack_archive.sh STAGE PACK"
  local stage="$1" pack="$2"
  [[ -f $stage/manifest.tsv ]] || die "no manifest.tsv in $stage"
  command -v xz >/dev/null || die "xz is not installed (tools/lockstep setup installs xz-utils)"
  local dir
  for dir in bin lib data; do mkdir -p "$stage/$dir"; done

  rm -rf "$pack"
  mkdir -p "$pack"
  local staged glibc
  staged="$(du -cb "$stage/bin" "$stage/lib" "$stage/data" | awk 'END { print $1 }')"
  glibc="$(needed_glibc "$stage")"
  log "compressing $(mib "$staged") of binaries, libraries and data (xz -9, one stream)"
  tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -cf - bin lib data |
    xz -9 -T1 -c >"$pack/pack.tar.xz" || die "compressing the pack failed"
  local archived
  archived="$(stat -c %s "$pack/pack.tar.xz")"
  {
    cat "$stage/manifest.tsv"
    echo "# needs glibc $glibc"
    printf '# archive pack.tar.xz %s bytes (%s unpacked)\n' "$archived" "$staged"
  } >"$pack/manifest.tsv"
  cp "$HERE/device_check.sh" "$HERE/device_check_lib.sh" "$pack/"

  local packed repo total spare
  packed="$(du -cb "$pack" | awk 'END { print $1 }')"
  repo="$(repo_bytes)"
  total=$((packed + repo))
  spare=$((CALL_LIMIT_BYTES - total))
  log "pack: $pack, $packed bytes ($(mib "$packed"); $(mib "$staged") unpacked), needs glibc >= $glibc"
  log "the device call carries the repository ($repo bytes) and the pack: $total of" \
    "$CALL_LIMIT_BYTES bytes ($(mib "$total") of $(mib "$CALL_LIMIT_BYTES"); $spare to spare," \
    "margin $MARGIN_BYTES)"
  if ((spare < MARGIN_BYTES)); then
    die "does not fit: pack $packed + repository $repo = $total bytes, over the call's" \
      "$CALL_LIMIT_BYTES less the $MARGIN_BYTES-byte margin (does a check link OpenBLAS?)"
  fi
}

main "$@"
