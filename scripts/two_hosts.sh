#!/usr/bin/env bash
# Two "machines" on this one: runs an MPI job with one rank in each of two network namespaces of its
# own (tfm-host1-PID, tfm-host2-PID: a veth pair, 10.213.13.1/24 and .2/24, loopback; nothing else),
# talking over TCP as two hosts would. mpirun starts in host1; host2's daemon is started by a launch
# agent standing in for ssh (ip netns exec, a hostname of its own, a clean environment); only the
# TCP transports on the veth subnet are allowed. Removes the namespaces on every exit. Needs root.
# Usage: scripts/two_hosts.sh [--timeout S (300)] [-- COMMAND ARGS...]
#          no COMMAND: compiles and runs tests/fixtures/mpi/two_hosts_check.c (namespaces, shared
#          memory, all-reduce sum, TCP all-reduce bandwidth); e.g. COMMAND:
#          build/release/bench_allreduce --sizes-mb 4,64
#        scripts/two_hosts.sh --train [--steps N (5)] [--tol X (1e-5)] [--timeout S]
#          trains a tiny model (build/release/tfm, multi30k from $TFM_DATA_DIR or ../shared/data)
#          for N updates: one process with data.accumulate 2; two ranks on one host (shared
#          memory); two ranks here. The last checkpoints (weights, Adam moments) of the two-rank
#          runs must be identical (a sum of two is the same in any order); the one-process run's
#          within --tol, the largest relative L2 difference of a tensor (the one process adds its
#          second batch's gradient inside the products, two ranks add two finished gradients).
#          `tfm train` under mpirun: every rank runs the same command line in the same directory
#          and reads the corpus at the same paths; rank 0 alone writes --run-dir; each rank
#          computes data.accumulate batches of each update (docs/DISTRIBUTED.md).
# Passed to the ranks: OMP_*, TFM_*, MKL_*, OPENBLAS_*, CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH, PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=300 train=0 steps=5 tol=1e-5
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) limit="$2"; shift 2 ;;
    --train) train=1; shift ;;
    --steps) steps="$2"; shift 2 ;;
    --tol) tol="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "two_hosts.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "two_hosts.sh: needs root (it creates network namespaces)" >&2; exit 2; }
for tool in ip mpirun mpicc unshare timeout; do
  command -v "$tool" >/dev/null || { echo "two_hosts.sh: needs $tool (iproute2, openmpi-bin, libopenmpi-dev, util-linux, coreutils)" >&2; exit 2; }
done

net=10.213.13 ns1="tfm-host1-$$" ns2="tfm-host2-$$" if1="tfmh1-$$" if2="tfmh2-$$"
tmp="$(mktemp -d /tmp/tfm-two-hosts.XXXXXX)"
job=""
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  [ -z "$job" ] || kill -TERM "$job" 2>/dev/null || true   # timeout passes it on to mpirun
  for ns in "$ns1" "$ns2"; do
    # Whatever still runs in our namespaces (all started by this script): 3 s to end, then killed.
    for _ in 1 2 3 4 5 6; do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.5; done
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$ns1"
ip netns add "$ns2"
ip link add "$if1" netns "$ns1" type veth peer name "$if2" netns "$ns2"
for i in 1 2; do
  ns="ns$i" dev="if$i"
  ip -n "${!ns}" link set lo up
  ip -n "${!ns}" addr add "$net.$i/24" dev "${!dev}"
  ip -n "${!ns}" link set "${!dev}" up
  echo "host$i: namespace ${!ns}: $(ip -n "${!ns}" -o -4 addr show | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $4}')"
done

# The stand-in for ssh: `AGENT [OPTIONS] HOST COMMAND...` runs COMMAND in HOST's namespace, in a
# UTS namespace named like the host, with a login-like environment (mpirun's does not leak through).
cat > "$tmp/agent" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host="\$1"; shift
case "\$host" in
  $net.1) ns=$ns1 name=tfm-host1 ;;
  $net.2) ns=$ns2 name=tfm-host2 ;;
  *) echo "two_hosts.sh agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts env -i HOME="\$HOME" PATH=/usr/local/bin:/usr/bin:/bin \\
  /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' "\$name" "\$*"
AGENT
chmod +x "$tmp/agent"

# mpirun in host1 (its rank is local there); bounded by timeout; exit status of mpirun.
run_two_hosts() {
  local pass=() v
  for v in $(compgen -e); do
    [[ "$v" =~ ^(OMP_|TFM_|MKL_|OPENBLAS_)|^(CUDA_VISIBLE_DEVICES|LD_LIBRARY_PATH|PATH)$ ]] && pass+=(-x "$v")
  done
  timeout -k 15 "$limit" ip netns exec "$ns1" unshare --uts \
    /bin/sh -c 'hostname tfm-host1 && exec "$@"' sh \
    mpirun --allow-run-as-root -np 2 -H "$net.1:1,$net.2:1" \
      --mca plm_rsh_agent "$tmp/agent" \
      --mca pml ob1 --mca btl tcp,self --mca osc pt2pt \
      --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
      "${pass[@]}" "$@" < /dev/null &
  job=$!
  local status=0
  wait "$job" || status=$?
  job=""
  [ "$status" != 124 ] && [ "$status" != 137 ] || echo "two_hosts.sh: mpirun ran past ${limit} s; stopped" >&2
  return "$status"
}
veth_bytes() { ip netns exec "$ns1" cat "/sys/class/net/$if1/statistics/tx_bytes" "/sys/class/net/$if1/statistics/rx_bytes" | paste -sd' '; }

if [ "$train" = 0 ]; then
  if [ $# = 0 ]; then
    mpicc -O2 -Wall -o "$tmp/two_hosts_check" tests/fixtures/mpi/two_hosts_check.c
    set -- "$tmp/two_hosts_check"
  fi
  read -r tx0 rx0 < <(veth_bytes)
  status=0
  run_two_hosts "$@" || status=$?
  read -r tx1 rx1 < <(veth_bytes)
  echo "veth $if1 (host1): sent $(( (tx1 - tx0) / 1000000 )) MB, received $(( (rx1 - rx0) / 1000000 )) MB during the job; exit status $status"
  exit "$status"
fi

# --train.
tfm=build/release/tfm
[ -x "$tfm" ] || { echo "two_hosts.sh: build $tfm first (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
data=""
for d in "${TFM_DATA_DIR:-}/multi30k" ../shared/data/multi30k; do
  [ -f "$d/train.en.gz" ] && { data="$d"; break; }
done
[ -n "$data" ] || { echo "two_hosts.sh: no multi30k/train.en.gz under \$TFM_DATA_DIR or ../shared/data" >&2; exit 2; }
dir="$PWD/build/two_hosts"
rm -rf "$dir" && mkdir -p "$dir/data"
zcat "$data/train.en.gz" | sed -n 1,2000p > "$dir/data/train.en"
zcat "$data/train.de.gz" | sed -n 1,2000p > "$dir/data/train.de"
"$tfm" vocab -i "$dir/data/train.en" -i "$dir/data/train.de" -o "$dir/data/vocab" --size 1000 --threads 1 > "$dir/vocab.log" 2>&1
cat > "$dir/recipe.yaml" <<YAML
model: {preset: base, layers: 2, d_model: 64, d_ff: 128, heads: 4, d_k: 16, d_v: 16, dropout: 0.1, max_positions: 128}
data: {train_source: $dir/data/train.en, train_target: $dir/data/train.de, vocab: $dir/data/vocab.model, max_length: 64, max_tokens: 1024}
optimizer: {warmup: 100}
training: {max_steps: $steps, seed: 1, threads: 1, precision: f32, log_every: 1}
checkpoints: {every_steps: $steps, every_minutes: 0, keep: 1}
validation: {bleu: false}
YAML
export OMP_NUM_THREADS=1
echo "== one process, data.accumulate 2: $steps updates ($dir/one.log)"
timeout -k 15 "$limit" "$tfm" train -c "$dir/recipe.yaml" --run-dir "$dir/one" --set data.accumulate=2 > "$dir/one.log" 2>&1 \
  || { echo "two_hosts.sh: the one-process run failed:"; tail -5 "$dir/one.log"; exit 1; }
echo "== two ranks on one host, shared memory ($dir/shm.log)"
timeout -k 15 "$limit" ip netns exec "$ns1" mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS \
  "$tfm" train -c "$dir/recipe.yaml" --run-dir "$dir/shm" < /dev/null > "$dir/shm.log" 2>&1 \
  || { echo "two_hosts.sh: the one-host run failed:"; grep -m 3 error "$dir/shm.log" || tail -5 "$dir/shm.log"; exit 1; }
echo "== two ranks, one per namespace, TCP ($dir/tcp.log)"
run_two_hosts "$tfm" train -c "$dir/recipe.yaml" --run-dir "$dir/tcp" > "$dir/tcp.log" 2>&1 \
  || { echo "two_hosts.sh: the two-host run failed:"; grep -m 3 error "$dir/tcp.log" || tail -5 "$dir/tcp.log"; exit 1; }
grep -m1 '^MPI' "$dir/tcp.log"
echo "losses, one process | two hosts:"
paste -d'|' <(grep '^step' "$dir/one.log" | cut -d'|' -f1,3) <(grep '^step' "$dir/tcp.log" | cut -d'|' -f3)
# The last checkpoints: shm and tcp bit for bit; one and tcp within --tol (relative L2 per tensor).
ckpt="checkpoints/step-$(printf %09d "$steps")"
status=0
for pair in "shm 0" "one $tol"; do
  read -r ref t <<< "$pair"
  for f in model.safetensors optimizer.safetensors; do
    if cmp -s "$dir/$ref/$ckpt/$f" "$dir/tcp/$ckpt/$f"; then
      echo "$f: two hosts (TCP) = $ref: identical"
    else
      echo -n "$f: two hosts (TCP) vs $ref: "
      python3 - "$dir/$ref/$ckpt/$f" "$dir/tcp/$ckpt/$f" "$t" <<'PY' || status=1
import json, struct, sys
from array import array
def load(path):  # name -> F32 values
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    return {k: array("f", blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}
a, b = load(sys.argv[1]), load(sys.argv[2])
def relative(x, y):  # ||x - y|| / ||y||; NaN: infinitely far
    d = sum((p - q) ** 2 for p, q in zip(x, y))
    n = sum(q * q for q in y)
    return float("inf") if d != d else (d / n) ** 0.5 if n > 0 else (0.0 if d == 0 else float("inf"))
worst = max((relative(a[k], b[k]) for k in a.keys() & b.keys()), default=0.0)
ok = a.keys() == b.keys() and worst <= float(sys.argv[3])
print(f"{'within tolerance' if ok else 'DIFFERENT'}: largest relative L2 difference of a tensor",
      f"{worst:.3g} (tolerance {sys.argv[3]})" + ("" if a.keys() == b.keys() else "; other tensors"))
sys.exit(0 if ok else 1)
PY
    fi
  done
done
exit "$status"
