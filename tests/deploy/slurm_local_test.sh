#!/usr/bin/env bash
# A real Slurm cluster on this machine (Debian's Slurm, munge, two emulated nodes)
# running the disaggregated tiny-moe deployment through deploy/slurm/lockstep.sbatch:
#
#   1. installs slurmctld, slurmd, slurm-client and munge if missing (tools/lockstep setup);
#   2. starts munged, slurmctld and `slurmd -N n1`, `slurmd -N n2` on free ports, all
#      state under the test's temporary directories;
#   3. sbatch's the deployment: router and context DEP2 on n1, generation DEP4 on n2,
#      engine cpu, the ranks being the srun tasks, with the cluster token the plan wrote;
#   4. 20 OpenAI requests through the router: 20/20;
#   5. SIGKILLs one generation rank while 4 streams generate: they end with errors,
#      the step is restarted (--kill-on-bad-exit + the plan's restart loop), and new
#      requests succeed;
#   6. scancel, then every daemon it started is stopped by pid.
# Cleanup runs on every exit. Needs root (CI runs as root). Every wait has a deadline.
set -euo pipefail
# Bazel's test environment leaves the sbin directories (munged, slurmd, runuser) out.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

log() { printf '[slurm-test %(%T)T] %s\n' -1 "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}

[[ $(id -u) -eq 0 ]] || fail "needs root: it installs packages and runs slurmd (CI runs as root)"

runfiles="$(pwd)"
lockstep_bin="$(readlink -f "$runfiles/tools/lockstep")"
sbatch_script="$(readlink -f "$runfiles/deploy/slurm/lockstep.sbatch")"
# The runfiles are links into the source tree; its entry script sits beside them.
setup_script="$(cd "$(dirname "$sbatch_script")/../.." && pwd)/tools/lockstep"
[[ -x $setup_script ]] || fail "tools/lockstep not found at $setup_script"
client="$(readlink -f "$runfiles/tests/deploy/openai_client.py")"
start_seconds=$SECONDS

# ---- 1. packages --------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
  ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  log "installing Slurm and munge (tools/lockstep setup)"
  "$setup_script" setup
fi

# ---- state and cleanup --------------------------------------------------------------
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
dir="$tmp/slurm"
mkdir -p "$dir"
# munged runs as munge, which cannot enter Bazel's directories under /root; and
# slurmd's sockets need a path shorter than Bazel's temporary directory.
short_dir="$(mktemp -d /tmp/lockstep-slurm.XXXXXX)"
munge_dir="$short_dir/munge"
slurm_dir="$short_dir/slurm"
mkdir -p "$munge_dir" "$slurm_dir/state" "$slurm_dir/spool-n1" "$slurm_dir/spool-n2"
daemon_pids=()
job_id=""

# Kills (TERM, then KILL after a deadline) every process whose command line mentions
# this test's directory: ranks or routers a dying slurmd might leave behind.
kill_leftovers() {
  local pids=() pid cmdline
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [[ $pid -eq $$ ]] && continue
    cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || continue
    if [[ $cmdline == *"$dir/"* ]]; then pids+=("$pid"); fi
  done
  [[ ${#pids[@]} -eq 0 ]] && return 0
  log "stopping ${#pids[@]} leftover process(es): ${pids[*]}"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait_for 10 "leftovers exit" all_gone "${pids[@]}" || kill -KILL "${pids[@]}" 2>/dev/null || true
}

all_gone() {
  local pid
  for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 1; done
  return 0
}

cleanup() {
  local rc=$?
  set +e
  if [[ -n $job_id ]]; then
    scancel "$job_id" 2>/dev/null
    wait_for 20 "job $job_id to end" job_gone >/dev/null 2>&1
  fi
  if [[ ${#daemon_pids[@]} -gt 0 ]]; then
    log "stopping daemons: ${daemon_pids[*]}"
    kill -TERM "${daemon_pids[@]}" 2>/dev/null
    wait_for 10 "daemons exit" all_gone "${daemon_pids[@]}" || kill -KILL "${daemon_pids[@]}" 2>/dev/null
  fi
  kill_leftovers
  if [[ $rc -ne 0 ]]; then
    for f in "$slurm_dir"/*.log "$dir"/*.log "$dir"/run/*.log "$dir"/job.out; do
      [[ -f $f ]] || continue
      echo "==== tail $f" >&2
      tail -n 25 "$f" >&2
    done
  fi
  rm -rf "$short_dir"
  log "done in $((SECONDS - start_seconds)) s (exit $rc)"
}
trap cleanup EXIT

# wait_for SECONDS WHAT COMMAND...: polls COMMAND until it succeeds, at most SECONDS.
wait_for() {
  local limit="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${limit}s waiting for $what"
      return 1
    fi
    sleep 0.1
  done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- 2. munge and Slurm -------------------------------------------------------------
host="$(hostname -s)"
chown munge:munge "$munge_dir"
chmod 0755 "$short_dir" "$munge_dir"  # munged wants its socket directory searchable by all
[[ -s /etc/munge/munge.key ]] || fail "/etc/munge/munge.key is missing (the munge package makes it)"
runuser -u munge -- munged --foreground --socket="$munge_dir/munge.socket" \
  --pid-file="$munge_dir/munged.pid" --log-file="$munge_dir/munged.log" \
  --seed-file="$munge_dir/munged.seed" --key-file=/etc/munge/munge.key \
  >"$dir/munged.log" 2>&1 &
daemon_pids+=($!)
munge_works() { munge -n --socket="$munge_dir/munge.socket" 2>/dev/null | unmunge --socket="$munge_dir/munge.socket" >/dev/null 2>&1; }
wait_for 15 "munged" munge_works || fail "munged did not start"
daemon_pids+=("$(cat "$munge_dir/munged.pid")")

ctld_port="$(free_port)"
n1_port="$(free_port)"
n2_port="$(free_port)"
export SLURM_CONF="$dir/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=lockstep-test
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_dir/munge.socket
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=2
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool-%n
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$n1_port CPUs=8 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$n2_port CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
daemon_pids+=($!)
for node in n1 n2; do
  slurmd -D -N "$node" -f "$SLURM_CONF" >"$dir/slurmd-$node.out" 2>&1 &
  daemon_pids+=($!)
done
nodes_idle() { [[ $(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | paste -sd, -) == "n1,n2" ]]; }
wait_for 60 "nodes n1 and n2 to be idle" nodes_idle || fail "the cluster did not come up"
log "cluster up: slurmctld on :$ctld_port, n1 on :$n1_port, n2 on :$n2_port"

# ---- 3. the deployment --------------------------------------------------------------
"$lockstep_bin" make-model --preset tiny-moe --out "$dir/model" --seed 7 >/dev/null
grpc_port="$(free_port)"
config="$dir/disagg.yaml"
cat >"$config" <<YAML
model:
  name: tiny-moe
  path: $dir/model
  draft_path: $dir/model/draft
router:
  http_listen: "127.0.0.1:0"
  grpc_listen: "0.0.0.0:$grpc_port"
  policy: least_load
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 1500
  health_check_interval_ms: 200
instances:
  - name: ctx0
    role: context
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 8, max_num_tokens: 512, max_num_active_requests: 16,
               draft_pool: unpaired}
    kv: {tokens_per_block: 16, num_blocks: 512, draft_num_blocks: 512}
    speculative: {method: draft_model, num_draft_tokens: 3}
    transfer: {deadline_ms: 1500, lease_ms: 4000}
  - name: gen0
    role: generation
    world_size: 4
    engine: cpu
    executor: {max_batch_size: 2, max_num_tokens: 64, max_num_active_requests: 4,
               draft_pool: unpaired}
    kv: {tokens_per_block: 16, num_blocks: 256, draft_num_blocks: 256}
    speculative: {method: draft_model, num_draft_tokens: 3}
    transfer: {deadline_ms: 1500, lease_ms: 4000}
YAML
run_dir="$dir/run"
job_id="$(cd "$dir" && LOCKSTEP="$lockstep_bin" sbatch --parsable -N2 -w n1,n2 \
  --output="$dir/job.out" "$sbatch_script" "$config" "$run_dir")"
job_id="${job_id%%;*}"
log "job $job_id submitted"
job_gone() { [[ -z $(squeue -h -j "$job_id" 2>/dev/null) ]]; }

router_up_or_job_gone() { [[ -s $run_dir/router.address.json ]] || job_gone; }
wait_for 60 "the router's address file" router_up_or_job_gone || fail "the router did not start"
[[ -s $run_dir/router.address.json ]] || fail "job $job_id ended before the router started"
http="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$run_dir/router.address.json")"
# "healthy" for both instances in the router's /health.
both_healthy() {
  curl -sf --max-time 2 "http://$http/health" 2>/dev/null | python3 -c '
import json, sys
h = json.load(sys.stdin)
states = {i.get("name"): i.get("state") for i in h.get("instances", [])}
sys.exit(0 if states.get("ctx0") == "healthy" and states.get("gen0") == "healthy" else 1)'
}
wait_for 90 "ctx0 and gen0 to be healthy" both_healthy || fail "the instances did not become healthy"
log "deployment ready at http://$http after $((SECONDS - start_seconds)) s"
# The plan wrote the cluster token (0600) and every step presents it: the ranks
# registered, and the router says where its token came from.
[[ $(stat -c %a "$run_dir/cluster_token") == 600 ]] || fail "the run's cluster_token is not 0600"
grep -q "cluster token from LOCKSTEP_CLUSTER_TOKEN_FILE ($run_dir/cluster_token)" \
  "$run_dir/router.log" || fail "the router did not use the plan's cluster token"

# expect_counts JSON OK ERRORS_MIN: the client's summary has OK oks and >= ERRORS_MIN errors.
count_of() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# ---- 4. 20 requests -----------------------------------------------------------------
summary="$(python3 "$client" "$http" tiny-moe --count 20 --max-tokens 16 --timeout-s 60)"
log "20 requests: $summary"
[[ $(count_of "$summary" ok) -eq 20 ]] || fail "want 20/20 ok, got $summary"

# ---- 5. SIGKILL a generation rank mid-generation ------------------------------------
# The pid of gen0's rank 1: an srun task whose environment says SLURM_PROCID=1 and whose
# command line runs this config's gen0.
# (No `tr | grep -q` pipelines here or in kill_leftovers: under pipefail, grep quitting at
# its first match can end tr with SIGPIPE and fail the pipeline, which made this miss the
# process now and then.)
gen_rank_pid() {
  local pid cmdline environ
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || continue
    [[ $cmdline == *"worker --config $config --instance gen0"* ]] || continue
    environ="$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ")" || continue
    [[ $'\n'$environ$'\n' == *$'\n'SLURM_PROCID=1$'\n'* ]] || continue
    echo "$pid"
    return 0
  done
  return 1
}
victim="$(gen_rank_pid)" || fail "no gen0 rank 1 process found"
ready_file="$dir/streams_generating"
python3 "$client" "$http" tiny-moe --count 4 --max-tokens 1500 --stream \
  --ready-file "$ready_file" --ready-chunks 3 --timeout-s 60 >"$dir/inflight.json" &
client_pid=$!
streams_generating() { [[ -e $ready_file ]]; }
wait_for 60 "4 streams to generate" streams_generating || fail "the streams did not start"
log "killing gen0 rank 1 (pid $victim) with SIGKILL"
kill -KILL "$victim"
client_done() { ! kill -0 "$client_pid" 2>/dev/null; }
wait_for 60 "the in-flight requests to end" client_done || fail "in-flight requests hung"
wait "$client_pid" || true
summary="$(cat "$dir/inflight.json")"
log "in-flight requests: $summary"
[[ $(count_of "$summary" errors) -ge 1 ]] || fail "want the in-flight requests to end with errors, got $summary"

step_restarted() { grep -q "step gen0 exited with status" "$dir/job.out" 2>/dev/null; }
wait_for 30 "the gen0 step to be restarted" step_restarted || fail "the gen0 step was not restarted"
new_rank() { local pid; pid="$(gen_rank_pid)" && [[ $pid != "$victim" ]]; }
wait_for 60 "a new gen0 rank 1" new_rank || fail "no new gen0 rank 1"
wait_for 90 "gen0 to be healthy again" both_healthy || fail "gen0 did not come back"
summary="$(python3 "$client" "$http" tiny-moe --count 8 --max-tokens 16 --timeout-s 60)"
log "after the restart: $summary"
[[ $(count_of "$summary" ok) -eq 8 ]] || fail "want 8/8 ok after the restart, got $summary"

# ---- 6. teardown (also on failure, in cleanup) ---------------------------------------
scancel "$job_id"
wait_for 30 "job $job_id to end" job_gone || fail "scancel did not end the job"
job_id=""
log "PASS in $((SECONDS - start_seconds)) s"
