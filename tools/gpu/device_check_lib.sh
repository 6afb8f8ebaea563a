# Functions of tools/gpu/device_check.sh (sourced by it; pack_archive.sh packs both):
# finding the CUDA libraries, unpacking the pack, failure excerpts, the machine's
# description, summary.txt and the results archive. They read the script's globals
# (PACK, OUT_DIR, RESULTS_DIR and the result arrays) and print nothing unless said.

# The directory holding library $1 in the usual places, or nothing (prints it).
find_lib_dir() {
  local lib="$1" dir hit
  for dir in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 \
    /usr/local/cuda/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
    /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e $dir/$lib ]] && { say "$dir"; return; }
  done
  hit="$(/sbin/ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l { print $NF; exit }')"
  [[ -n $hit ]] && { dirname "$hit"; return; }
  # pip wheels (nvidia-cuda-runtime, nvidia-cublas, nvidia-nccl-cu13, e.g. under torch).
  local py
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    hit="$(timeout 20 "$py" - "$lib" 2>/dev/null <<'PY'
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()] + sys.path)
for root in sorted(r for r in roots if r and os.path.isdir(r)):
    for path in glob.glob(os.path.join(root, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(path)); sys.exit(0)
PY
)"
    [[ -n $hit ]] && { say "$hit"; return; }
  done
}

# True when version $1 is older than version $2 (x.y).
version_older() {
  [[ $1 != "$2" && $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1) == "$1" ]]
}

# Unpacks $PACK/pack.tar.xz into directory $1 with xz, else python3's lzma; prints the
# tool used. Fails (printing nothing) when neither can.
unpack_pack() {
  local into="$1"
  rm -rf "$into" && mkdir -p "$into" || return 1
  if command -v xz >/dev/null && xz -dc "$PACK/pack.tar.xz" 2>/dev/null | tar -x -C "$into" 2>/dev/null; then
    say xz
    return 0
  fi
  rm -rf "$into" && mkdir -p "$into" || return 1
  command -v python3 >/dev/null || return 1
  python3 - "$PACK/pack.tar.xz" "$into" 2>/dev/null <<'PY' || return 1
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as archive:
    kwargs = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    archive.extractall(sys.argv[2], **kwargs)
PY
  say "python3's lzma (no working xz)"
}

# The first lines of a failure in log $1 (at most $2): from the first line that looks
# like an error (a gtest failure, a CHECK, a loader error, a signal), else its last lines.
failure_excerpt() {
  local log="$1" lines="$2" first
  [[ -f $log ]] || return 0
  first="$(grep -n -m 1 -E 'Failure$|\[  FAILED  \]|[Ee]rror|FATAL|Check failed|Segmentation|Aborted|terminate called|NOT FOUND' \
    "$log" | cut -d: -f1)"
  if [[ -n $first ]]; then
    tail -n "+$first" "$log" | head -n "$lines"
  else
    tail -n "$lines" "$log"
  fi | cut -c 1-240
}

# The machine's description for summary.txt: C library, driver, GPU, CUDA/cuBLAS/NCCL
# (the probe's log) and an nvidia-smi -q excerpt (all of it in RUN_DIR/nvidia-smi-q.txt).
describe_machine() {
  say "== ldd --version"
  ldd --version 2>&1 | head -n 2
  say ""
  say "== gpu_probe (driver, CUDA runtime, cuBLAS, cuBLASLt, NCCL, each GPU)"
  if [[ -f $OUT_DIR/gpu_probe.log ]]; then head -n 40 "$OUT_DIR/gpu_probe.log"; else say "(not run)"; fi
  say ""
  say "== nvidia-smi -q (excerpt; all of it in nvidia-smi-q.txt)"
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi -q >"$OUT_DIR/nvidia-smi-q.txt" 2>&1
    grep -E '^(Driver Version|CUDA Version|Attached GPUs|GPU )|Product (Name|Architecture)|Persistence Mode|MIG Mode|Compute Mode|Performance State|Bus Id|^ +(Total|Used|Free) +:|(Graphics|SM|Memory) +: [0-9]+ MHz|GPU Current Temp|Power Draw|Current Limit|Clocks Event Reasons Active|Virtualization Mode|Host VGPU Mode' \
      "$OUT_DIR/nvidia-smi-q.txt" | head -n 60
  else
    say "nvidia-smi: not installed"
  fi
}

# Writes RUN_DIR/summary.txt from the result arrays (names, results, seconds, notes) and
# the count line $1.
write_summary() {
  local counts="$1" i name log
  {
    say "Lockstep GPU acceptance run, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
    grep '^# built\|^# flags\|^# needs\|^# archive' "$PACK/manifest.tsv" | sed 's/^# /pack /'
    say "$run_note"
    say ""
    say "== Results ($(($(date +%s) - script_start)) s of the ${BUDGET_S} s budget)"
    print_table 0
    say "$counts"
    say ""
    say "== Goals (every PASS/MISS and goals: line of the benchmarks)"
    for i in "${!names[@]}"; do
      log="$OUT_DIR/${names[$i]}.log"
      [[ ${kinds[$i]} == bench && -f $log ]] || continue
      grep -E '^goals: |[[:space:]](PASS|MISS)([[:space:]]|$)' "$log" | sed "s/^/${names[$i]}: /"
    done
    for i in "${!names[@]}"; do
      [[ ${results[$i]} == FAIL || ${results[$i]} == TIMEOUT ]] || continue
      say ""
      say "== ${names[$i]}: ${results[$i]} (first lines of the failure; all in ${names[$i]}.log)"
      failure_excerpt "$OUT_DIR/${names[$i]}.log" 20
    done
    say ""
    describe_machine
    for i in "${!names[@]}"; do
      log="$OUT_DIR/${names[$i]}.log"
      [[ ${kinds[$i]} == bench && -f $log ]] || continue
      say ""
      say "== ${names[$i]} (figures, up to 120 lines)"
      head -n 120 "$log" | cut -c 1-240
    done
  } >"$OUT_DIR/summary.txt" 2>&1
}

# The result table: every row, notes cut to 100 characters when $1 is 1 (what is
# printed), whole in summary.txt.
print_table() {
  local short="$1" i note
  printf '%-40s %-8s %6s  %s\n' CHECK RESULT SECONDS NOTE
  for i in "${!names[@]}"; do
    note="${notes[$i]}"
    ((short == 1 && ${#note} > 100)) && note="${note:0:97}..."
    printf '%-40s %-8s %6s  %s\n' "${names[$i]}" "${results[$i]}" "${seconds[$i]}" "$note"
  done
}

# With RESULTS_DIR: copies summary.txt there and the run directory as gpu-run.tar.gz
# (without the models checks wrote, *.safetensors: random weights that do not compress;
# logs over 8 MiB cut to their first and last MiB; if the archive is still over 15 MiB,
# device_check.log and summary.txt only). Prints nothing: it runs after the output
# is closed. A problem is appended to RESULTS_DIR/summary.txt.
archive_results() {
  [[ -n ${RESULTS_DIR:-} ]] || return 0
  local big part="$RESULTS_DIR/gpu-run.tar.gz.part"
  while read -r big; do
    [[ -n $big ]] || continue
    { head -c 1048576 "$big"; printf '\n[... cut by device_check.sh: %s bytes in all ...]\n' \
      "$(stat -c %s "$big")"; tail -c 1048576 "$big"; } >"$big.cut" && mv "$big.cut" "$big"
  done < <(find "$OUT_DIR" -type f -size +8M 2>/dev/null)
  [[ -f $OUT_DIR/summary.txt ]] && cp "$OUT_DIR/summary.txt" "$RESULTS_DIR/summary.txt"
  local parent base
  parent="$(dirname "$OUT_DIR")" base="$(basename "$OUT_DIR")"
  tar -C "$parent" --exclude="$base/gpu-run.tar.gz*" --exclude='*.safetensors' -czf "$part" "$base" \
    2>/dev/null
  if [[ ! -s $part || $(stat -c %s "$part") -gt $((15 * 1048576)) ]]; then
    tar -C "$parent" -czf "$part" "$base/device_check.log" "$base/summary.txt" 2>/dev/null
    say "device_check: the whole run directory would not fit 16 MiB: the archive holds device_check.log and summary.txt only" \
      >>"$RESULTS_DIR/summary.txt"
  fi
  mv "$part" "$RESULTS_DIR/gpu-run.tar.gz"
}
