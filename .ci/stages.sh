# The stage runner of .ci/run (sourced; tests/test_hardening.py runs it on its own).
#
# Every stage runs whatever the earlier ones gave (one flaky test must not hide the security
# stage, issue 30.16); `ci_summary` prints one line per stage and returns non-zero when any
# failed. Nothing here needs a terminal, and it behaves the same with SIGINT ignored
# (`trap "" INT`, nohup) and with CI=true.

CI_STAGES=()
CI_CODES=()

# stage NAME COMMAND [ARG...]: run one stage (a shell snippet: `stage x bash -c '...'`).
stage() {
    local name=$1
    shift
    echo "=== .ci/run: stage $name: $*"
    local start=$SECONDS code=0
    "$@" || code=$?
    CI_STAGES+=("$name")
    CI_CODES+=("$code")
    if [ "$code" -eq 0 ]; then
        echo "=== .ci/run: stage $name passed ($((SECONDS - start)) s)"
    else
        echo "=== .ci/run: stage $name FAILED with exit code $code ($((SECONDS - start)) s)"
    fi
}

# ci_summary: one line per stage; exit status 1 when a stage failed.
ci_summary() {
    local i failed=0
    echo "=== .ci/run: summary"
    for i in "${!CI_STAGES[@]}"; do
        if [ "${CI_CODES[$i]}" -eq 0 ]; then
            echo "  passed  ${CI_STAGES[$i]}"
        else
            echo "  FAILED  ${CI_STAGES[$i]} (exit code ${CI_CODES[$i]})"
            failed=$((failed + 1))
        fi
    done
    if [ "$failed" -ne 0 ]; then
        echo "=== .ci/run: $failed of ${#CI_STAGES[@]} stages failed"
        return 1
    fi
    echo "=== .ci/run: all ${#CI_STAGES[@]} stages passed"
}
