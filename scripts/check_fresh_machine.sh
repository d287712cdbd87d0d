#!/usr/bin/env bash
# The fresh-machine check: proves that the README's two commands work on a Debian 12 machine where
# nothing was installed by hand. Builds a minimal Debian 12 root (mmdebstrap, variant minbase) from
# the archive named in this machine's apt sources, puts a clean clone of this repository's committed
# HEAD at /root/tfm in it (uncommitted changes are NOT tested) and a copy of ../shared at /root/shared,
# then runs, as root in a chroot with an empty environment, the README's main job (with the training
# budget given here) and its test command, and installs the .deb of the build they made with apt-get
# (docs/PACKAGING.md), runs its `tfm` and imports its Python module from Debian's python3. Needs root
# and the network (the Debian archive).
#
# Usage: scripts/check_fresh_machine.sh [--minutes N] [--keep] [--update-stamp]
#   --minutes N     training budget of the main job, in minutes (default 1; the README says 5)
#   --keep          keep the root afterwards (it is removed by default)
#   --update-stamp  after a PASS, write .ci/fresh-machine.stamp (the set-up fingerprint of what passed,
#                   scripts/setup_fingerprint.sh) so that CI skips the check until the set-up changes
#   --steps LIST    for debugging: run only these of bootstrap,clone,main,tests,deb (comma-separated)
#   -h, --help      this text
# Prints one line per step with its exit status and seconds, keeps each step's log in a folder it
# names, and ends with "fresh-machine check: PASS" (exit 0) or "fresh-machine check: FAIL" (exit 1).
set -euo pipefail
shopt -s inherit_errexit

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "check_fresh_machine.sh: $*" >&2; exit 2; }

minutes=1
keep=0
root=""
update_stamp=0
all_steps="bootstrap,clone,main,tests,deb"
steps="$all_steps"
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) [ $# -ge 2 ] || die "--minutes needs a value"; minutes="$2"; shift ;;
    --minutes=*) minutes="${1#*=}" ;;
    --keep) keep=1 ;;
    --update-stamp) update_stamp=1 ;;
    --steps) [ $# -ge 2 ] || die "--steps needs a value"; steps="$2"; shift ;;
    --steps=*) steps="${1#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
  esac
  shift
done
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "--minutes wants a whole number of minutes >= 1, not '$minutes'"
for s in ${steps//,/ }; do
  case "$s" in bootstrap|clone|main|tests|deb) ;; *) die "unknown step '$s' in --steps" ;; esac
done
want() { [[ ",$steps," == *",$1,"* ]]; }
want bootstrap || die "--steps must include bootstrap (every step runs in the new root)"
if [ "$update_stamp" = 1 ] && [ "$steps" != "$all_steps" ]; then
  die "--update-stamp needs the whole check (no --steps)"
fi

[ "$(id -u)" = 0 ] || die "must run as root (it builds a Debian root and chroots into it); try: sudo $0 $*"
[ "$(uname -s)" = Linux ] || die "needs Linux"

repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"

# The archive: the bookworm entries (component main) of this machine's apt sources, one-line
# (*.list) and deb822 (*.sources) formats.
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '
      { sub(/#.*/, "") }
      $1 != "deb" { next }
      {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        uri = $i; suite = $(i + 1); main = 0
        for (j = i + 2; j <= NF; j++) if ($j == "main") main = 1
        if (main) print uri, suite
      }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function flush(   i, j, k, nt, nu, ns, nc, t, u, s, c, deb, main) {
        if (enabled != "no") {
          nt = split(types, t); nu = split(uris, u); ns = split(suites, s); nc = split(comps, c)
          for (i = 1; i <= nt; i++) if (t[i] == "deb") deb = 1
          for (i = 1; i <= nc; i++) if (c[i] == "main") main = 1
          if (deb && main) for (j = 1; j <= nu; j++) for (k = 1; k <= ns; k++) print u[j], s[k]
        }
        types = uris = suites = comps = key = ""; enabled = "yes"
      }
      BEGIN { enabled = "yes" }
      /^[[:space:]]*#/ { next }
      /^[[:space:]]*$/ { flush(); next }
      /^[[:space:]]/ { if (key == "uris") uris = uris " " $0; else if (key == "suites") suites = suites " " $0
                       else if (key == "types") types = types " " $0; else if (key == "components") comps = comps " " $0
                       next }
      {
        key = tolower(substr($0, 1, index($0, ":") - 1)); value = substr($0, index($0, ":") + 1)
        if (key == "types") types = value; else if (key == "uris") uris = value
        else if (key == "suites") suites = value; else if (key == "components") comps = value
        else if (key == "enabled") { enabled = tolower(value); gsub(/[[:space:]]/, "", enabled) }
      }
      END { flush() }' "$f"
  done
}
# A fresh Debian 12 machine also has bookworm-updates and bookworm-security: taken too when listed.
mirrors=()
declare -A seen=()
have_bookworm=0
while read -r uri suite; do
  case "$uri" in http://*|https://*|file:/*) ;; *) continue ;; esac
  case "$suite" in
    bookworm) have_bookworm=1 ;;
    bookworm-updates|bookworm-security) ;;
    *) continue ;;
  esac
  line="deb ${uri%/} $suite main"
  [ -n "${seen[$line]:-}" ] || mirrors+=("$line")
  seen[$line]=1
done < <(apt_sources)
[ "$have_bookworm" = 1 ] || die "no 'bookworm' suite with component main in /etc/apt/sources.list or /etc/apt/sources.list.d/*.{list,sources}"
include=()
if printf '%s\n' "${mirrors[@]}" | grep -q '^deb https://'; then include=(--include=ca-certificates); fi

# mmdebstrap (and git, to clone): installed through apt when missing.
tools=()
command -v mmdebstrap >/dev/null 2>&1 || tools+=(mmdebstrap debian-archive-keyring)
command -v git >/dev/null 2>&1 || tools+=(git)
if [ "${#tools[@]}" -gt 0 ]; then
  echo "check_fresh_machine.sh: installing ${tools[*]}"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${tools[@]}"; } >/dev/null \
    || die "cannot install ${tools[*]} with apt-get; install them and rerun"
  command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is still missing after apt-get install"
fi

# What is tested: a clone of the committed HEAD, or, outside a git checkout, a copy of the tree.
head=""
if git -C "$repo" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  head="$(git -C "$repo" rev-parse HEAD)"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fresh-machine-XXXXXX")"
root="$work/root"
logs="$work"
[[ "$root" != *[[:space:]]* ]] || die "the work folder $work has a space in its name; set TMPDIR"

# The mount points at or below the root, deepest (latest) first.
mounts_below() {
  [ -n "$root" ] && [ "$root" != / ] || return 0
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | tac
}
unmount_all() {
  local m
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "check_fresh_machine.sh: cannot unmount $m" >&2
  done < <(mounts_below)
}
cleanup() {
  local status=$?
  set +e
  unmount_all
  if [ -d "$root" ]; then
    if [ -n "$(mounts_below)" ]; then
      echo "check_fresh_machine.sh: something is still mounted under $root; not removing it" >&2
    elif [ "$keep" = 1 ]; then
      echo "root kept: $root (remove with: rm -rf --one-file-system $root)"
    else
      rm -rf --one-file-system "$root"
    fi
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_in_root() {  # mount_in_root TARGET MOUNT-ARGS...
  local target="$root$1"; shift
  mkdir -p "$target"
  mount "$@" "$target"
}

if [ -n "$head" ]; then
  echo "fresh-machine check of $repo at HEAD $head"
  dirty="$(git -C "$repo" status --porcelain --untracked-files=no | wc -l)"
  if [ "$dirty" -gt 0 ]; then
    echo "note: $dirty uncommitted change(s) in $repo are NOT tested: the check clones the committed HEAD"
  else
    echo "note: the check clones the committed HEAD (no uncommitted changes to tracked files)"
  fi
else
  echo "fresh-machine check of $repo (not a git checkout: the tree is copied, without build/ and runs/)"
fi
echo "archive: ${mirrors[*]/%/;}"
echo "logs: $logs/*.log"

# The README's two commands (as in the tested tree), the main job's budget replaced by --minutes.
readme_commands() {
  local commands main
  commands="$(cd "$root/root/tfm" && scripts/setup_fingerprint.sh --commands)"
  main="$(printf '%s\n' "$commands" | sed -n 1p)"
  [[ "$main" =~ multi30k\.sh[[:space:]]+[0-9]+ ]] \
    || { echo "the README's first command has no 'multi30k.sh MINUTES': $main" >&2; return 1; }
  printf '%s\n' "$main" | sed -E "s/(multi30k\\.sh[[:space:]]+)[0-9]+/\\1$minutes/"
  printf '%s\n' "$commands" | sed -n 2p
}

# The step deb: the .deb of the release build that the main job made (CPack: cmake/packaging.cmake),
# installed as a user installs a downloaded package, `apt-get install ./tfm_*.deb` (its Depends
# resolved by apt), then used from where it put things, outside the checkout: `tfm` on the PATH, the
# module imported by Debian's python3 without PYTHONPATH, trained and translated as that `tfm` does
# (python/tests/installed_check.py), and the CMake package found by an outside project
# (tests/consumer).
deb_commands() {
  cat <<'EOF'
set -euo pipefail
cpack --config build/release/CPackConfig.cmake -B /tmp/tfm-packages
deb="$(ls /tmp/tfm-packages/tfm_*.deb)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb"
dpkg-query -W -f='${Package} ${Version}\nDepends: ${Depends}\n' tfm
cd /tmp
[ "$(command -v tfm)" = /usr/bin/tfm ]
version="$(tfm --version | sed -n 's/^tfm //p')"
echo "tfm --version: $version"
tfm info --preset base --vocab 37000 | grep 63,045,632
python3 /root/tfm/python/tests/installed_check.py --module-dir /usr/lib/python3/dist-packages/tfm \
  --version "$version" --cli /usr/bin/tfm
cmake -S /root/tfm/tests/consumer -B /tmp/tfm-consumer -G Ninja -DCMAKE_BUILD_TYPE=Release
grep -q '^tfm_DIR:PATH=/usr/lib/cmake/tfm$' /tmp/tfm-consumer/CMakeCache.txt
cmake --build /tmp/tfm-consumer
/tmp/tfm-consumer/consumer /root/tfm/tests/fixtures/tiny 2>&1 | grep 'vocab.model: missing'
echo "the .deb: installed with apt-get, tfm, the Python module and the CMake package work: ok"
EOF
}

failed=""
results=()
# step NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log, prints its line.
step() {
  local name="$1"; shift
  local start status
  start="$(date +%s)"
  set +e
  (set -e; "$@") > "$logs/$name.log" 2>&1 < /dev/null
  status=$?
  set -e
  local line
  line="$(printf 'step %-9s exit %-3s %5s s   log %s' "$name" "$status" "$(($(date +%s) - start))" "$logs/$name.log")"
  echo "$line"
  results+=("$line")
  if [ "$status" != 0 ]; then
    failed="$name"
    echo "---- last 40 lines of $logs/$name.log:"
    tail -n 40 "$logs/$name.log"
    echo "----"
  fi
}
skip() { echo "step $(printf '%-9s' "$1") skipped${2:+ ($2)}"; }

bootstrap() {
  mmdebstrap --variant=minbase --mode=root "${include[@]}" bookworm "$root" "${mirrors[@]}"
  # What a booted machine has: /proc, /sys, /dev with its pseudo-terminals and shared memory, DNS.
  mount_in_root /proc -t proc proc
  mount_in_root /sys -t sysfs -o ro,nosuid,nodev,noexec sysfs
  mount_in_root /dev --bind /dev
  mount_in_root /dev/pts --bind /dev/pts
  mount_in_root /dev/shm -t tmpfs -o nosuid,nodev,mode=1777 tmpfs
  rm -f "$root/etc/resolv.conf"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # The network's own certificate authorities: where this machine's network inspects TLS with a CA
  # of its own (installed here as a local CA), any machine on it trusts that CA, so the new root
  # does too. They wait in the root's local CA folder; the ca-certificates package that setup.sh
  # installs adds them to the bundle (npm and curl read it; see NODE_EXTRA_CA_CERTS in in_root).
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  echo "== the new root's apt sources:"
  cat "$root/etc/apt/sources.list"
  echo "== dpkg -l | wc -l: $(chroot "$root" dpkg-query -W | wc -l) packages"
}

clone() {
  if [ -n "$head" ]; then
    git clone --no-hardlinks "$repo" "$root/root/tfm"
    git -C "$root/root/tfm" checkout --detach "$head"
    git -C "$root/root/tfm" log -1 --format='%H %s'
  else
    mkdir -p "$root/root/tfm"
    tar -C "$repo" --exclude=./build --exclude=./runs -cf - . | tar -C "$root/root/tfm" -xf -
  fi
  (cd "$root/root/tfm" && scripts/setup_fingerprint.sh) > "$work/tested.fingerprint"
  (cd "$root/root/tfm" && scripts/setup_fingerprint.sh --files) > "$work/tested.files"
  readme_commands > "$work/commands"
  echo "the README's two commands, main job with --minutes $minutes:"
  cat "$work/commands"
  echo "set-up fingerprint of the clone: $(cat "$work/tested.fingerprint")"
  if [ -d "$shared" ]; then
    local size_mb
    size_mb="$(du -sm "$shared" | cut -f1)"
    echo "$shared: $size_mb MB"
    if [ "$size_mb" -le 1024 ]; then
      cp -a "$shared" "$root/root/shared"
    elif [ -d "$shared/data/multi30k" ]; then
      echo "copying only data/multi30k"
      mkdir -p "$root/root/shared/data"
      cp -a "$shared/data/multi30k" "$root/root/shared/data/multi30k"
    fi
  else
    echo "no $shared: the main job downloads Multi30k (scripts/fetch_multi30k.sh)"
  fi
  ls -la "$root/root"
}

# in_root COMMAND: runs a shell command line in /root/tfm, as root, with an empty environment
# (no LANG or LC_*: a missing locale shows), no terminal and no input.
in_root() {
  local envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root
              LOGNAME=root SHELL=/bin/bash)
  local v
  # The network's settings, as a machine on it has them: proxies, and the CA bundle that Node (npm)
  # should trust besides its own list.
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY NODE_EXTRA_CA_CERTS; do
    [ -z "${!v:-}" ] || envs+=("$v=${!v}")
  done
  echo "== in the fresh root, /root/tfm: $1"
  chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -c "cd /root/tfm && $1"
}

step bootstrap bootstrap
for s in clone main tests deb; do
  if ! want "$s"; then
    skip "$s" "not in --steps"
  elif [ -n "$failed" ]; then
    skip "$s" "$failed failed"
  else
    case "$s" in
      clone) step clone clone ;;
      main) step main in_root "$(sed -n 1p "$work/commands")" ;;
      tests) step tests in_root "$(sed -n 2p "$work/commands")" ;;
      deb) step deb in_root "$(deb_commands)" ;;
    esac
    if [ "$s" = main ] && [ -z "$failed" ]; then
      grep -A1 '^== test 2016' "$logs/main.log" | tail -n 1 | sed 's/^/main job: /' || true
    fi
  fi
done

if [ -n "$failed" ]; then
  echo "fresh-machine check: FAIL"
  exit 1
fi
if [ "$steps" != "$all_steps" ]; then
  echo "fresh-machine check: INCOMPLETE (only --steps $steps ran, and passed)"
  exit 0
fi

if [ "$update_stamp" = 1 ]; then
  tested="$(cat "$work/tested.fingerprint")"
  current="$(cd "$repo" && scripts/setup_fingerprint.sh)"
  if [ "$tested" != "$current" ]; then
    echo "not updating .ci/fresh-machine.stamp: the set-up files in $repo differ from the tested HEAD" \
         "(commit them and rerun)" >&2
    echo "fresh-machine check: FAIL"
    exit 1
  fi
  {
    echo "# The set-up fingerprint (scripts/setup_fingerprint.sh) of a passing scripts/check_fresh_machine.sh"
    echo "# run ($(date -u +%Y-%m-%d), commit ${head:0:12}, --minutes $minutes). CI runs the check when they differ."
    echo "# Its inputs (scripts/setup_fingerprint.sh --files), for CI to say what changed:"
    sed 's/^/#   /' "$work/tested.files"
    echo "$tested"
  } > "$repo/.ci/fresh-machine.stamp"
  echo "wrote $repo/.ci/fresh-machine.stamp ($tested): commit it"
fi
echo "fresh-machine check: PASS"
