#!/bin/sh
# The A/B bench of .github/workflows/bench.yml, in two steps a test can run on its own
# (tests/it/ci_bench.rs).
#
#   sh scripts/ci-bench.sh bench OUT ROUNDS BASE_BIN HEAD_BIN RUN_ARGS...
#       ROUNDS rounds on one machine, base then head in each (A B A B ...), every run into
#       OUT/rounds/R/SIDE. A run's exit status is recorded in OUT/exits and never stops the
#       loop: 1 (a safety violation) and 3 (a verdict of unknown) still wrote a complete
#       result set; anything else (130 interrupted, 2 refused, a crash) did not.
#   sh scripts/ci-bench.sh report OUT BIN [COMPARE_ARGS...]
#       Pairs the rounds: a round counts only when both of its runs wrote a complete result
#       set (exit 0, 1 or 3). The paired rounds' runs go to OUT/base and OUT/head, so the two
#       sides always hold the same rounds, and `BIN compare OUT/base OUT/head` judges them;
#       a round with one side missing is left out on both sides and the report says so. With
#       no paired round nothing is compared. Writes OUT/report.md (for the job summary and
#       the pull-request comment; its first line is the marker <!-- dlbench --> that finds
#       the comment again) and exits with compare's status (0 no regression, 1 a regression,
#       3 none detectable, 2 refused), or 2 when no round could be compared.
set -eu

usage() {
    sed -n '2,20p' "$0" >&2
    exit 2
}

# What a run's exit status means (dlbench run: judgement::exit_code, and 130 when cut short).
meaning() {
    case $1 in
        0) echo "exit 0" ;;
        1) echo "exit 1: a safety violation (verdict invalid; see its checks.json)" ;;
        3) echo "exit 3: verdict unknown (too little evidence to judge)" ;;
        130) echo "exit 130: interrupted, no complete result set" ;;
        none) echo "not run" ;;
        *) echo "exit $1: no result set (see the run's log)" ;;
    esac
}

# The run directory a side of a round wrote, when it is a complete result set.
result_set() { # OUT R SIDE -> prints the run directory, or fails
    rc=$(awk -v r="$2" -v s="$3" '$1 == r && $2 == s { rc = $3 } END { print rc }' "$1/exits")
    case $rc in 0 | 1 | 3) ;; *) return 1 ;; esac
    [ -f "$1/rounds/$2/$3/latest/summary.json" ] || return 1
    (cd "$1/rounds/$2/$3/latest" && pwd -P)
}

bench() {
    [ $# -ge 4 ] || usage
    out=$1 rounds=$2 base_bin=$3 head_bin=$4
    shift 4
    mkdir -p "$out"
    : >"$out/exits"
    r=1
    while [ "$r" -le "$rounds" ]; do
        for side in base head; do
            if [ "$side" = base ]; then bin=$base_bin; else bin=$head_bin; fi
            dir=$out/rounds/$r/$side
            mkdir -p "$dir"
            set +e
            "$bin" run "$@" --out "$dir" >"$dir.log" 2>&1
            rc=$?
            set -e
            echo "$r $side $rc" >>"$out/exits"
            echo "round $r $side: $(meaning "$rc")"
            case $rc in 0 | 1 | 3) ;; *) tail -n 20 "$dir.log" ;; esac
        done
        r=$((r + 1))
    done
}

report() {
    [ $# -ge 2 ] || usage
    out=$1 bin=$2
    shift 2
    [ -f "$out/exits" ] || { echo "ci-bench: $out/exits is missing: run the bench step first" >&2; exit 2; }
    rm -rf "$out/base" "$out/head"
    mkdir -p "$out/base" "$out/head"
    md=$out/report.md
    rounds=$(awk '{ print $1 }' "$out/exits" | sort -n | uniq)
    paired=0 left_out=""
    {
        echo "<!-- dlbench -->"
        echo "## dlbench: merge base against this pull request"
        echo
        echo "| round | base | head | compared |"
        echo "| --- | --- | --- | --- |"
    } >"$md"
    for r in $rounds; do
        b=$(awk -v r="$r" '$1 == r && $2 == "base" { print $3 }' "$out/exits")
        h=$(awk -v r="$r" '$1 == r && $2 == "head" { print $3 }' "$out/exits")
        if bdir=$(result_set "$out" "$r" base) && hdir=$(result_set "$out" "$r" head); then
            ln -s "$bdir" "$out/base/round-$r"
            ln -s "$hdir" "$out/head/round-$r"
            paired=$((paired + 1))
            yes=yes
        else
            left_out="$left_out $r"
            yes="no: left out on both sides"
        fi
        echo "| $r | $(meaning "${b:-none}") | $(meaning "${h:-none}") | $yes |" >>"$md"
    done
    echo >>"$md"
    if [ -n "$left_out" ]; then
        echo "Round(s)$left_out did not finish on both sides and are left out of both, so the two sides compare the same rounds ($paired each)." >>"$md"
        echo >>"$md"
    fi
    if [ "$paired" -eq 0 ]; then
        echo "**No comparison**: no round finished on both sides (see the runs' logs in the artifact)." >>"$md"
        cat "$md"
        exit 2
    fi
    set +e
    "$bin" compare "$out/base" "$out/head" --markdown "$out/compare.md" --json "$out/compare.json" "$@" >"$out/compare.log" 2>&1
    rc=$?
    set -e
    if [ -s "$out/compare.md" ]; then
        cat "$out/compare.md" >>"$md"
    else
        echo "**compare failed** (exit $rc):" >>"$md"
        echo >>"$md"
        sed 's/^/    /' "$out/compare.log" >>"$md"
    fi
    cat "$md"
    exit "$rc"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
    bench) bench "$@" ;;
    report) report "$@" ;;
    *) usage ;;
esac
