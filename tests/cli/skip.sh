# skip.sh — sourced by the test scripts: skip_or_fail WHAT for a missing prerequisite. Outside CI
# a ctest skip (one line, exit 77: SKIP_RETURN_CODE); under CI (CI=true or 1), where the build or
# the CI script provides it, a failure (exit 1). The C tests' twin is tests/test_skip.h.
skip_or_fail() {
    if [[ ${CI:-} == true || ${CI:-} == 1 ]]; then
        echo "FAIL: $1 (a prerequisite that CI provides; CI=$CI)"
        exit 1
    fi
    echo "SKIP: $1"
    exit 77
}
