#!/usr/bin/env bash
# Runs a sweep on the GPU machine reached through the `device` tool (see DESIGN.md "GPU runs").
# On this machine first:  bash ../shared/device/stage-vllm.sh      (builds .device-stage/part_*)
#                         bash tools/gpu_run.sh pack               (builds .gpu/bins.tgz)
# On the GPU machine, in the checkout, one call each:
#   bash .device-stage/gpu-setup.sh receive      (once per part, carrying one part each)
#   or, when the checkout has grown (every call carries it, 64 MiB in all): `bash tools/gpu_run.sh
#   parts` here (re-splits the bundle and the binaries to fit), then `bash tools/gpu_run.sh
#   receive` there once per part (carrying .device-stage/s/part_NNN or .gpu/b/part_NNN), and
#   start carrying only .device-stage/gpu-setup.sh. Send the first receive call alone: when no
#   machine can be started every call is refused and still costs device time (15 s each, a
#   failed start up to ~170 s; 2026-12-03), so batch the other parts only once it lands. It
#   prints the machine's GPU model: resume the root of that model (a root holds one; an H100
#   may come for a call naming nvidia-h200)
#   bash tools/gpu_run.sh start PROFILE OUT [ctax run args...]   (carry .gpu; installs vLLM,
#        unpacks ctax + ctax-collect, writes the stand-in model, starts `ctax run` detached;
#        every argument after OUT goes to `ctax run`, e.g. --gpus 0,1, --launches 2,
#        --skip-stage 4, --shard 1/2, --port-offset 1000, --plain-last, --phase-b-first 4096/256,
#        --phase-bp-first 4096/256, --phase-a-order 4,6,8,2,
#        --end-by @$(( $(date +%s) + BUDGET_LEFT_S - 120 )): no launch
#        starts that is not expected to end while the budget lasts, with two minutes left for
#        the bring-back; an absolute time holds for every sweep of a chain, and a sweep that
#        held a launch back exits 5, which ends the chain); `--then` separates sweeps run one after the other in the same
#        detached job, root and log (`start P OUT --launches 6 --then --launches 7
#        --phase-a-order 4,6,8,2`): no call gap between them; a failed sweep ends the chain. Each
#        sweep gets PROFILE, OUT and ITS OWN arguments only: repeat --gpus, --skip-stage ... after
#        every --then. An empty sweep (--then first, last or doubled), or a usage error in any
#        sweep's arguments (each is dry-run first: a misspelt flag, --configs without plain, a
#        skeleton OUT without --skip-stage 2 and 4), or a sweep that runs Phase B at the root's
#        reference rates as they are (--skip-stage 2) after a sweep that adds Phase A launches
#        (the rates would predate them: put B first, let stage 2 run on a full root, or give it
#        --reference-rates), is refused before anything starts
#   bash tools/gpu_run.sh wait SECONDS OUT [DEST] (sleeps until the sweep ends or SECONDS pass, at
#        most 530 so the bring-back fits the device's 600-s call; log tail; exit 3 without
#        OUT.pid; with DEST ($OUT), every call brings back what this stretch wrote so far:
#        `fetch` when the sweep has ended, else `snapshot`. Use it on every wait: the machine is given
#        back after 30 s without a call, and on 2026-12-02 a finished 18-min sweep was lost to
#        one such gap between the wait that saw it end and the fetch call)
#        Chain the first wait into the start call (`start ... > /tmp/start.txt 2>&1; tail -3
#        /tmp/start.txt; bash tools/gpu_run.sh wait 420 OUT $OUT`): a gap after `start` lost a
#        machine on 2026-12-02 too.
#   bash tools/gpu_run.sh snapshot OUT DEST      (while the sweep runs: the files written since
#        `start` (newer than OUT.stamp) as they are, raw JSONL uncompressed, tarred into DEST;
#        touches nothing in OUT: compressing a raw file the collector still appends to would
#        lose its later lines)
#   bash tools/gpu_run.sh stop OUT               (SIGTERM to the sweep(s): every slot's server stopped, data
#        kept, no later sweep of a --then chain started)
#   bash tools/gpu_run.sh probe JSON [LENS]      (prefill capacity per input length, default
#        4096,16384,32768: tools/prefill_probe.py on a plain server, GPU 0; not during a sweep)
#   bash tools/gpu_run.sh fetch OUT DEST         (after the sweep: compresses raw JSONL and large server
#        logs, copies the sweep's log to OUT/ctax_run_<UTC stamp>.log, tars what this stretch
#        wrote (newer than OUT.stamp; all of OUT without a stamp) into DEST, <16 MiB parts;
#        here, after unpacking: `ctax archive ROOT --recompress --columns` shrinks the raw step
#        logs that `ctax run` wrote at zstd 9 by ~23% and stores the request files as request
#        columns (~26% smaller, DESIGN.md §2.7), verified, without spending device time)
# Before staging, see what a stretch would run, here: `target/release/ctax run --profile
# ROOT/profile.toml --out ROOT --gpus 0 [same args] --dry-run` (writes nothing).
# A later stretch resumes an archived root. The archive outgrew the 64 MiB a call carries, so it
# travels as a skeleton (what `ctax run` reads to resume it, ~4 MB): here `target/release/ctax
# skeleton results/ROOT .gpu/root/NAME`, move results/ out of the working tree for the start call
# too, carry .gpu/root with it, and there `cp -a .gpu/root/NAME OUT` before `start OUT/profile.toml
# OUT ... --skip-stage 2 --skip-stage 4` and one of --skip-stage 1 / --skip-stage 3 (a skeleton
# cannot compute reference rates or analyse: Phase B uses the archive's reference_rates.json).
# Complete launches are skipped, `--launches N` / `--configs` choose what is added. Back here,
# untar the bring-back and `target/release/ctax rejoin BACK/NAME results/ROOT`: each run directory
# that came back joins whole (a resumed one comes back whole and replaces the archive's), with
# manifest.jsonl, .ctax/plan_*, preflight/ and the sweep log (DESIGN.md §7.1, §8).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmd=${1:-}; shift || true

# Tars into DEST/results.tgz (parts of 15 MiB when larger) what the stretch wrote under OUT: the
# files newer than OUT.stamp (`start` writes it), or all of OUT when there is no stamp, plus the
# sweep's log (OUT.log, beside OUT). During a sweep files come and go: a file removed between
# the listing and tar (a raw step log compressed at a launch's end, a temp file renamed) is
# skipped (--ignore-failed-read), temp files are not listed, and an `X.jsonl.zst` is left out
# while its `X.jsonl` is still there (the plain file holds everything; the pair must not land
# together). A file still being written is taken as it is.
bring_back() {
  local out=$1 dest=$2 base parent list
  base=$(basename "$out")
  parent=$(dirname "$out")
  list=$(mktemp)
  local newer=()
  [[ -f "$out.stamp" ]] && newer=(-newer "$out.stamp")
  # A run directory with anything new comes back whole (a launch resumed there moved files to
  # superseded/ keeping their old times, compressed its logs, removed step files): the copy back
  # then replaces the directory instead of mixing two states. A skeleton's marker
  # (.ctax/skeleton.json) never comes back: copied into the full root, ingest would refuse it.
  # Nor does the root's lock file (.ctax/run.lock, which ctax run and ctax archive create): no
  # data, and ctax rejoin never joins it.
  {
    (cd "$parent" && find "$base" -type f "${newer[@]}")
    (cd "$parent" && find "$base" -mindepth 2 -type f "${newer[@]}") | cut -d/ -f2 | sort -u \
      | while IFS= read -r d; do
          if [[ -f "$parent/$base/$d/config.json" ]]; then (cd "$parent" && find "$base/$d" -type f); fi
        done
  } | sort -u \
    | while IFS= read -r f; do
        case "${f##*/}" in .summary.lock | *.tmp*) continue ;; esac
        if [[ "$f" == "$base/.ctax/skeleton.json" || "$f" == "$base/.ctax/run.lock" ]]; then continue; fi
        if [[ "$f" == *.jsonl.zst && -e "$parent/${f%.zst}" ]]; then continue; fi
        printf '%s\n' "$f"
      done > "$list"
  [[ -f "$out.log" ]] && echo "$base.log" >> "$list"
  rm -f "$dest"/results.tgz "$dest"/results.tgz.part_*
  local rc=0
  tar czf "$dest/results.tgz" --warning=no-file-changed --ignore-failed-read \
    -C "$parent" -T "$list" || rc=$?
  (( rc <= 1 )) || { echo "[gpu_run] tar failed (exit $rc)" >&2; rm -f "$list"; return "$rc"; }
  echo "[gpu_run] $(wc -l < "$list") files written since the stretch began -> $dest/results.tgz"
  rm -f "$list"
  if (( $(stat -c %s "$dest/results.tgz") > 15 * 1024 * 1024 )); then
    split -b 15M -d "$dest/results.tgz" "$dest/results.tgz.part_"
    rm "$dest/results.tgz"
  fi
  ls -la "$dest"
}
# Refuses an empty sweep in `start`'s / `chain`'s arguments (`--then` first, last or twice in a
# row): `ctax run` without arguments would run the profile's whole default sweep.
check_parts() {
  local a prev=--then seen=0
  for a in "$@"; do [[ "$a" == --then ]] && seen=1; done
  (( seen )) || return 0
  for a in "$@" --then; do
    if [[ "$a" == --then && "$prev" == --then ]]; then
      echo "[gpu_run] an empty sweep (--then first, last or twice in a row): refused, nothing started" >&2
      exit 2
    fi
    prev=$a
  done
}
case "$cmd" in
  pack)
    mkdir -p "$REPO/.gpu"
    grep -qx "/.gpu/" "$REPO/.git/info/exclude" 2>/dev/null || echo "/.gpu/" >> "$REPO/.git/info/exclude"
    tar czf "$REPO/.gpu/bins.tgz" -C "$REPO/target/release" ctax ctax-collect
    ls -la "$REPO/.gpu/bins.tgz" ;;
  parts)
    # Every device call carries the whole checkout (tracked and untracked-not-ignored files) plus
    # what it names, 64 MiB in all, and results/ grows with every session: split the vLLM bundle
    # (.device-stage/part_*) and the binaries (.gpu/bins.tgz) into parts that fit next to the
    # checkout as it is now (2 MiB margin, at most 40 MiB, at least 4 MiB).
    # CTAX_PARTS_LEAN=1: size the parts for a working tree without results/ (commit the data
    # first, move results/ out of the checkout for the receive calls and back before `start`:
    # the 2026-12-01 sixth stretch staged in 8 calls of 58 MiB instead of ~16 of 30, DESIGN.md §8).
    lean=${CTAX_PARTS_LEAN:-0}
    tree=$(cd "$REPO" && { git ls-files -z; git ls-files -z --others --exclude-standard; } \
      | if [[ "$lean" == 1 ]]; then grep -zv '^results/'; else cat; fi \
      | du -cb --files0-from=- | tail -1 | cut -f1)
    mib=$(( (64 * 1024 * 1024 - 2 * 1024 * 1024 - tree) / 1024 / 1024 ))
    (( mib > 40 && lean != 1 )) && mib=40
    (( mib > 58 )) && mib=58
    if (( mib < 4 )); then
      echo "the checkout is $((tree / 1024 / 1024)) MiB: no room left for parts under 64 MiB" >&2
      exit 1
    fi
    rm -rf "$REPO/.device-stage/s" "$REPO/.gpu/b"
    mkdir -p "$REPO/.device-stage/s" "$REPO/.gpu/b"
    cat "$REPO"/.device-stage/part_* | split -b "${mib}M" -d -a 3 - "$REPO/.device-stage/s/part_"
    split -b "${mib}M" -d -a 3 "$REPO/.gpu/bins.tgz" "$REPO/.gpu/b/part_"
    echo "checkout $((tree / 1024 / 1024)) MiB: parts of $mib MiB," \
      "$(find "$REPO/.device-stage/s" -type f | wc -l) of the vLLM bundle (.device-stage/s/part_NNN)," \
      "$(find "$REPO/.gpu/b" -type f | wc -l) of the binaries (.gpu/b/part_NNN)" ;;
  receive)
    # On the GPU machine, once per call carrying one part made by `parts`.
    mkdir -p /tmp/stage /tmp/ctax-bins
    for f in "$REPO"/.device-stage/s/part_*; do [ -f "$f" ] && cp "$f" /tmp/stage/; done
    for f in "$REPO"/.gpu/b/part_*; do [ -f "$f" ] && cp "$f" /tmp/ctax-bins/; done
    echo "received: $(find /tmp/stage -type f | wc -l) bundle parts, $(find /tmp/ctax-bins -type f | wc -l) binary parts"
    # Which GPU model this machine has, on the first call already: a results root holds one
    # model (DESIGN.md §4.3 "GPU model"; `ctax run` refuses another), so the stretch resumes
    # the root of this model (an H100 came on 2026-12-05 for a call naming nvidia-h200).
    echo "GPU model here: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort -u | paste -sd, - || true)" ;;
  start)
    profile=${1:?profile}; out=${2:?results root}; shift 2
    check_parts "$@"
    # CTAX_SKIP_SETUP=1 (tests only): no vLLM install, no binaries unpacked over target/release.
    if [[ -z "${CTAX_SKIP_SETUP:-}" ]]; then
      if ! python3 -c 'import sys; sys.path.insert(0, "/tmp/site"); import vllm' 2>/dev/null; then
        bash "$REPO/.device-stage/gpu-setup.sh" install
      fi
      mkdir -p "$REPO/target/release"
      if [[ -f "$REPO/.gpu/bins.tgz" ]]; then
        tar xzf "$REPO/.gpu/bins.tgz" -C "$REPO/target/release"
      else
        cat /tmp/ctax-bins/part_* | tar xzf - -C "$REPO/target/release"
      fi
    fi
    mkdir -p "$out"
    # What this stretch writes is newer than the stamp (a carried root keeps its files' times):
    # `snapshot` and `fetch` bring back only that.
    [[ -f "$out.stamp" ]] || touch "$out.stamp"
    # The GPUs as ctax records them (index, UUID); ctax reads the same query per slot.
    nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader || echo "nvidia-smi: not available"
    # The log is appended to: a second `start` in the same stretch (same stamp) adds its sweeps
    # after the first's, which `fetch` then brings back in the one log named after the stretch
    # (2026-12-04: a second start truncated the log, and the first sweep's lines survived only
    # in an earlier bring-back).
    echo "[gpu_run] start $(date -u '+%Y-%m-%d %H:%M:%S') UTC: $*" >> "$out.log"
    setsid nohup bash "$REPO/tools/gpu_run.sh" chain "$profile" "$out" "$@" \
      >> "$out.log" 2>&1 < /dev/null &
    echo $! > "$out.pid"
    echo "started the sweep(s) (gpu_run.sh chain, pid $!), log $out.log"
    sleep "${CTAX_START_SETTLE_S:-20}"; tail -20 "$out.log" ;;
  chain)
    # What `start` runs detached: one `ctax run` per sweep, the sweeps split at `--then`, one
    # after the other into the same root and log; a sweep that fails (or is stopped) ends the
    # chain with its exit status, the sweeps after it not started. SIGTERM (`stop`) or SIGINT goes
    # on to the running sweep as SIGTERM (ctax run takes it as Ctrl-C: it stops its servers and
    # keeps its data), and the chain exits 130. CTAX_BIN: the ctax to run (tests).
    profile=${1:?profile}; out=${2:?results root}; shift 2
    check_parts "$@"
    bin=${CTAX_BIN:-$REPO/target/release/ctax}
    sweeps=() cur=""
    for a in "$@"; do
      if [[ "$a" == --then ]]; then sweeps+=("$cur"); cur=""; else cur+=" $(printf '%q' "$a")"; fi
    done
    sweeps+=("$cur")
    # Before anything starts, each sweep of a chain is dry-run on the root as it is now: a
    # usage error (exit 2: an argument `ctax run` does not take, a typo) in any sweep refuses the
    # chain, where it would otherwise end it only when that sweep's turn came, minutes of device
    # time later. Another failure of a later sweep's dry run is only reported: its plan can
    # depend on what the sweeps before it add (reference rates, launches).
    # A sweep that takes Phase B's rates from the root's reference_rates.json as it is (stage 2
    # skipped, stage 3 run, no --reference-rates) after a sweep that adds Phase A launches fails
    # at its turn, even with every Phase B launch done: the rates predate the new launches
    # (stages.rs `check_rates_current`), and each sweep's own dry run, on the root as it is now,
    # cannot see that. This holds on a full root as on a skeleton (`ctax skeleton`: no raw
    # records, so stage 2 cannot recompute the rates there and must be skipped). Read from the
    # dry runs' lines (`stage A, …: would launch|resume` and `stage 2 skipped: Phase B takes its
    # rates from … as it is`): refused before anything starts. Phase B first, then Phase A,
    # runs; so does Phase B with --reference-rates FILE, and on a full root Phase B letting
    # stage 2 recompute the rates.
    if (( ${#sweeps[@]} > 1 )); then
      k=0 adds_a=0
      skel=""; [[ -f "$out/.ctax/skeleton.json" ]] && skel=" (a skeleton: recompute them on the full root, \`ctax reference-rates\` after \`ctax rejoin\`)"
      for s in "${sweeps[@]}"; do
        k=$((k + 1))
        eval "set -- $s"
        [[ " $* " == *" --dry-run "* ]] && continue
        rc=0; msg=$("$bin" run --profile "$profile" --out "$out" "$@" --dry-run 2>&1 < /dev/null) || rc=$?
        if (( rc == 2 )); then
          printf '%s\n' "$msg" | tail -5 >&2
          echo "[gpu_run] sweep $k's arguments are refused by ctax run (usage error, exit 2): the chain is refused, nothing started" >&2
          exit 2
        elif (( rc != 0 )); then
          echo "[gpu_run] sweep $k's dry run on the root as it is now failed (exit $rc; the sweeps before it may change that): $(printf '%s\n' "$msg" | tail -1)"
        fi
        if (( adds_a )) && grep -Eq "^\[ctax\] stage 2 skipped: Phase B takes its rates from .* as it is" <<< "$msg"; then
          echo "[gpu_run] sweep $k runs Phase B at $out's reference rates as they are after sweep $adds_a adds Phase A launches, so the rates would predate them and sweep $k would fail at its turn$skel. Put the Phase B sweep first, give it --reference-rates FILE, let stage 2 run (full root only), or run it on a later stretch: the chain is refused, nothing started" >&2
          exit 2
        fi
        if (( ! adds_a )) && grep -Eq "^\[ctax\] dry run: stage A, .*: would (launch|resume)" <<< "$msg"; then
          adds_a=$k
        fi
      done
    fi
    # `start` detaches the chain from a shell without job control, so SIGINT reaches it ignored,
    # and a non-interactive bash cannot trap a signal ignored on entry: `stop` sends SIGTERM. The
    # trap signals every running job (also one started but not yet in `child`), waits whatever its
    # status, and exits 130. Job control (`set -m`) keeps each sweep in a process group of its own.
    set -m
    child=0
    trap 'kill -TERM $(jobs -p) 2>/dev/null || true; wait || true; echo "[gpu_run] stopped"; exit 130' INT TERM
    k=0
    for s in "${sweeps[@]}"; do
      k=$((k + 1))
      (( ${#sweeps[@]} == 1 )) || echo "[gpu_run] sweep $k of ${#sweeps[@]}: ctax run --profile $profile --out $out$s"
      eval "set -- $s"
      "$bin" run --profile "$profile" --out "$out" "$@" < /dev/null &
      child=$!
      rc=0; wait "$child" || rc=$?
      child=0
      if (( rc != 0 )); then
        (( k == ${#sweeps[@]} )) || echo "[gpu_run] sweep $k exited $rc: sweeps $((k + 1))-${#sweeps[@]} not started"
        exit "$rc"
      fi
    done ;;
  wait)
    secs=${1:?seconds}; out=${2:?results root}
    if [[ ! -f "$out.pid" ]]; then
      echo "NO SWEEP HERE: $out.pid is missing (a fresh machine? the device gives a machine back after 30 s without a call)"
      exit 3
    fi
    # A device call ends at 600 s: leave at least 60 s to bring the data back.
    if (( secs > 530 )); then echo "[gpu_run] waiting 530 s, not $secs: the bring-back needs the rest of the call"; secs=530; fi
    pid=$(cat "$out.pid" 2>/dev/null || echo 0)
    running() { [[ "$pid" != 0 ]] && kill -0 "$pid" 2>/dev/null; }
    end=$((SECONDS + secs))
    while (( SECONDS < end )); do
      running || break
      sleep 5
    done
    if running; then echo "STILL RUNNING"; else echo "FINISHED"; fi
    tail -40 "$out.log"
    if [[ -n "${3:-}" ]]; then
      if running; then bring_back "$out" "$3"; else bash "$REPO/tools/gpu_run.sh" fetch "$out" "$3"; fi
    fi ;;
  snapshot)
    out=${1:?results root}; dest=${2:?destination dir}
    bring_back "$out" "$dest" ;;
  stop)
    # Ctrl-C for the detached sweep(s): SIGTERM to the chain `start` began, which passes it on to
    # the running ctax run (it stops every slot's server, keeps the data and exits) and starts no
    # later sweep; resume later with the same start command.
    out=${1:?results root}
    pid=$(cat "$out.pid")
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    tail -20 "$out.log" ;;
  fetch)
    out=${1:?results root}; dest=${2:?destination dir}
    # Compress, and drop the per-cell step files that the raw step logs hold (verified per file;
    # ingest cuts them again). Files it leaves as they were are listed; the data stays whole.
    "$REPO/target/release/ctax" archive "$out" --slim-steps \
      || echo "[gpu_run] ctax archive was refused (a sweep still holds the root) or left some files as they were (above); fetching anyway"
    # One log per stretch (named after the stretch's start, so a second fetch replaces it with
    # the longer log: every `start` of the stretch appends to OUT.log): a resumed root keeps
    # every earlier stretch's log.
    if [[ -f "$out.stamp" ]]; then stamp=$(date -u -r "$out.stamp" +%Y%m%d-%H%M%S); else stamp=$(date -u +%Y%m%d-%H%M%S); fi
    cp "$out.log" "$out/ctax_run_$stamp.log" 2>/dev/null || true
    bring_back "$out" "$dest" ;;
  probe)
    # Prefill capacity of the stand-in per input length (tools/prefill_probe.py): a plain server
    # on GPU 0 with the h200/h200x2 profiles' engine settings; run it when no sweep is running.
    dest=${1:?output JSON file}; lens=${2:-4096,16384,32768}
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} CTAX_VLLM=/tmp/site/bin/vllm \
      CTAX_MODEL=${CTAX_MODEL:-/tmp/ctax-model/qwen3-coder-30b-a3b} CTAX_SERVED_NAME=qwen3-coder-30b-a3b \
      PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 CTAX_MAX_MODEL_LEN=200000 \
      CTAX_MAX_NUM_BATCHED_TOKENS=8192 CTAX_GPU_MEM_UTIL=0.9 \
      python3 "$REPO/tools/prefill_probe.py" --input-lens "$lens" --repeats 3 --burst 8 --out "$dest" ;;
  *) echo "usage: $0 pack | parts | receive | start PROFILE OUT [args] [--then args]... | chain PROFILE OUT [args] [--then args]... | wait SECONDS OUT [DEST] | snapshot OUT DEST | stop OUT | fetch OUT DEST | probe JSON [LENS]" >&2; exit 2 ;;
esac
