#!/usr/bin/env bash
# A fuzz campaign of one target, niced, with a persistent corpus:
#
#   tests/fuzz/run_campaign.sh TARGET SECONDS [libFuzzer flags...]
#
# TARGET: an atheris target (ebnf regex lark json_schema matcher mask_fork
# schema_oracle structural_tag: tests/fuzz/fuzz_TARGET.py) or "native" (tests/fuzz/native/
# fuzz_ebnf_matcher.c built with clang -fsanitize=fuzzer,address,undefined).
# Work folder: $XG2_FUZZ_WORK (default /tmp/xg2-fuzz): corpus/TARGET (grows across
# campaigns), finds/TARGET (crash-*, timeout-*, oom-* reproducers), TARGET.log.
# Prints executions, coverage (cov/ft: Python lines+branches for atheris, edges for
# native) and the finds.  Exit status 1 if there was a find.
set -u
TARGET=${1:?usage: run_campaign.sh TARGET SECONDS [libFuzzer flags]}
SECONDS_=${2:?usage: run_campaign.sh TARGET SECONDS [libFuzzer flags]}
shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${XG2_FUZZ_WORK:-/tmp/xg2-fuzz}
CORPUS=$WORK/corpus/$TARGET
FINDS=$WORK/finds/$TARGET
LOG=$WORK/$TARGET.log
mkdir -p "$CORPUS" "$FINDS"
# a timeout is 120 s (XG2_FUZZ_TIMEOUT): under ASan on a loaded 2-core machine a bounded 0.3 s
# compile took 30 s (regressions/native/optional_repeat_then_overlapping_class)
COMMON=(-max_total_time="$SECONDS_" -timeout=${XG2_FUZZ_TIMEOUT:-120} -rss_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$FINDS/")

if [ "$TARGET" = native ]; then
    CC=${CC:-clang}
    command -v "$CC" >/dev/null || { echo "native needs clang (apt-get install -y clang)"; exit 2; }
    EXE=$WORK/fuzz_native
    "$CC" -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer \
        -I"$ROOT/native/include" -I"$ROOT/native/src" "$ROOT"/native/src/*.c \
        "$ROOT/tests/fuzz/native/fuzz_ebnf_matcher.c" -o "$EXE" -pthread || exit 2
    SEEDS=("$ROOT/tests/fuzz/seeds/native" "$ROOT/tests/fuzz/seeds/ebnf" "$ROOT/tests/fuzz/regressions/native")
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        nice -n 19 "$EXE" "${COMMON[@]}" -max_len=4096 "$@" "$CORPUS" "${SEEDS[@]}" >"$LOG" 2>&1
else
    # atheris sees coverage of Python code only: a mypyc-built front-end (the production build)
    # runs but guides nothing -- campaign on a pure build (XG2_PURE_PYTHON=1 ... build_ext --inplace)
    ls "$ROOT"/xg2_plugin/json_schema*.so >/dev/null 2>&1 && \
        echo "warning: $ROOT has the mypyc-compiled JSON Schema front-end: its coverage is invisible to atheris" >&2
    SCRIPT=$ROOT/tests/fuzz/fuzz_$TARGET.py
    [ -f "$SCRIPT" ] || { echo "no target $SCRIPT"; exit 2; }
    MAX_LEN=2048
    [ "$TARGET" = structural_tag ] && MAX_LEN=4096  # a model's tool-call tag with 3 tools is 1-4 KB of JSON
    PYTHONPATH=$ROOT nice -n 19 python "$SCRIPT" "${COMMON[@]}" -max_len=$MAX_LEN "$@" \
        "$CORPUS" "$ROOT/tests/fuzz/seeds/$TARGET" >"$LOG" 2>&1
fi
RC=$?
LAST=$(grep -E '^#[0-9]+' "$LOG" | tail -1)
echo "target:     $TARGET ($SECONDS_ s, exit $RC)"
echo "executions: $(echo "$LAST" | sed -E 's/^#([0-9]+).*/\1/') (stat: $(grep -E 'stat::number_of_executed_units' "$LOG" | awk '{print $2}'))"
echo "coverage:   $(echo "$LAST" | grep -oE 'cov: [0-9]+ ft: [0-9]+')"
echo "corpus:     $(ls "$CORPUS" | wc -l) inputs in $CORPUS"
N=$(ls "$FINDS" | wc -l)
echo "finds:      $N in $FINDS"
if [ "$N" -gt 0 ] || grep -qE 'Uncaught Python exception|ERROR: libFuzzer|FIND |ERROR: AddressSanitizer|runtime error:' "$LOG"; then
    grep -E -A12 'Uncaught Python exception|FIND |ERROR: AddressSanitizer|runtime error:|ERROR: libFuzzer' "$LOG" | head -40
    exit 1
fi
