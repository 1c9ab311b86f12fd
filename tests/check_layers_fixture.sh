#!/usr/bin/env bash
# check_layers_fixture.sh — shows that scripts/check_layers.sh fails on what it must refuse: it
# compiles tiny source trees with CC into a temporary build tree laid out as CMake lays one out
# (CMakeCache.txt, CMakeFiles/<target>.dir/<source>.o, link.txt), runs the script on each and
# checks its exit status and what it names:
#   clean      a layered core/ library, a plugin library, a kernel library    -> 0
#   circle     two files of the plugin library call each other               -> 1, target and files
#   kcircle    a circle in the kernel library, one side a generated wrapper   -> 1, the wrapped file
#   upcall     core/base calls into core/text                                 -> 1, the call
#   include    core/base includes a header of core/text                       -> 1, the include
#   exe        the circle is in an executable (not a library)                 -> 0
#   exe_ninja  the same, as the Ninja generator lays it out (no link.txt)     -> 0
#   stale      the circle's other file is gone from the sources               -> 0
#   nobuild    no build tree                                                  -> 2
# usage: tests/check_layers_fixture.sh CC
set -euo pipefail

cc=${1:-cc}
script=$(cd "$(dirname "$0")/.." && pwd)/scripts/check_layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# obj TREE TARGET_DIR SOURCE: compiles TREE/src/SOURCE into TARGET_DIR/SOURCE.o.
obj() {
    mkdir -p "$(dirname "$2/$3.o")"
    "$cc" -c -I"$1/src/core" "$1/src/$3" -o "$2/$3.o"
}
put() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" >"$1"; }

# tree NAME: builds the fixture NAME (one of the cases above) under $tmp/NAME.
tree() {
    local t=$tmp/$1 s=$tmp/$1/src b=$tmp/$1/build
    put "$s/core/base/low.c" 'int low(void) { return 1; }'
    put "$s/core/text/high.h" 'int high(void);'
    put "$s/core/text/high.c" 'int low(void); int high(void) { return low() + 1; }'
    put "$s/core/base/up.c" 'int up(void) { return 0; }'
    put "$s/plugins/p/x.c" 'int y(void); int x(void) { return y(); }'
    put "$s/plugins/p/y.c" 'int y(void) { return 2; }'
    put "$s/kernels/a.c" 'int kb(void); int ka(void) { return kb(); }'
    put "$s/kernels/b.c" 'int kb(void) { return 3; }'
    case $1 in
    circle|exe|exe_ninja|stale)
        put "$s/plugins/p/y.c" 'int x(void); int y(void) { return x() + 2; }' ;;
    kcircle) put "$s/kernels/b.c" 'int ka(void); int kb(void) { return ka() + 3; }' ;;
    upcall) put "$s/core/base/up.c" 'int high(void); int up(void) { return high(); }' ;;
    include) put "$s/core/base/up.c" '#include "text/high.h"
int up(void) { return 0; }' ;;
    esac
    put "$b/CMakeCache.txt" "CMAKE_HOME_DIRECTORY:INTERNAL=$s"
    local core=$b/CMakeFiles/core.dir p=$b/plugins/p/CMakeFiles/p.dir k=$b/CMakeFiles/k.dir
    for f in core/base/low.c core/text/high.c core/base/up.c; do obj "$t" "$core" "$f"; done
    put "$core/link.txt" '/usr/bin/ar qc libcore.a CMakeFiles/core.dir/core/base/low.c.o'
    # a subdirectory's target: objects named relative to plugins/p
    mkdir -p "$p"
    "$cc" -c "$s/plugins/p/x.c" -o "$p/x.c.o"
    "$cc" -c "$s/plugins/p/y.c" -o "$p/y.c.o"
    put "$p/link.txt" 'cc -fPIC -shared -o libp.so CMakeFiles/p.dir/x.c.o CMakeFiles/p.dir/y.c.o'
    # a kernel module: b.c through a generated wrapper in the build tree (as cuda_emu/*.cpp)
    put "$b/gen/b_wrap.c" "/* generated */
#include \"$s/kernels/b.c\""
    obj "$t" "$k" kernels/a.c
    mkdir -p "$k/gen"
    "$cc" -c "$b/gen/b_wrap.c" -o "$k/gen/b_wrap.c.o"
    put "$k/link.txt" 'cc -shared -o libk.so CMakeFiles/k.dir/kernels/a.c.o'
    if [[ $1 == exe* ]]; then # the plugin's files are an executable's instead
        mv "$p" "$b/plugins/p/CMakeFiles/prog.dir"
        put "$b/plugins/p/CMakeFiles/prog.dir/link.txt" 'cc -O2 CMakeFiles/prog.dir/x.c.o -o prog'
        mkdir -p "$p"
        "$cc" -c "$s/plugins/p/x.c" -o "$p/x.c.o"
        put "$p/link.txt" 'cc -fPIC -shared -o libp.so CMakeFiles/p.dir/x.c.o'
    fi
    if [[ $1 == stale ]]; then rm "$s/plugins/p/y.c"; fi
    if [[ $1 == exe_ninja ]]; then # what links what is in build.ninja ("p_x": not p's rule)
        find "$b" -name link.txt -delete
        put "$b/build.ninja" "build plugins/p/prog: C_EXECUTABLE_LINKER__prog_Debug x.c.o y.c.o
build plugins/p/libp.so: C_MODULE_LIBRARY_LINKER__p_Debug x.c.o
build p_x: C_EXECUTABLE_LINKER__p_x_Debug x.c.o"
    fi
    return 0
}

# expect NAME STATUS [TEXT...]: the script on fixture NAME exits STATUS and prints each TEXT.
expect() {
    local name=$1 want=$2 got=0 out
    shift 2
    out=$(bash "$script" "$tmp/$name/build" core/ kernels/ plugins/ 2>&1) || got=$?
    local ok=1
    ((got == want)) || { echo "FAIL $name: exit $got, want $want"; ok=0; }
    for text in "$@"; do
        grep -qF -- "$text" <<<"$out" || { echo "FAIL $name: no \"$text\" in the output"; ok=0; }
    done
    if ((ok)); then echo "ok   $name (exit $got)"; else echo "   | ${out//$'\n'/$'\n'   | }"; fails=1; fi
}

for t in clean circle kcircle upcall include exe exe_ninja stale; do tree $t; done
expect clean 0 "core (core/): no cycles" "p (plugins/): no cycles" "k (kernels/): no cycles" \
    "layers hold"
expect circle 1 "p: cycle 1:" "plugins/p/x.c -> plugins/p/y.c: y" \
    "plugins/p/y.c -> plugins/p/x.c: x" "p (plugins/): 1 cycle(s)"
expect kcircle 1 "k: cycle 1:" "kernels/a.c -> kernels/b.c: kb" "kernels/b.c -> kernels/a.c: ka"
expect upcall 1 "core: core/base/up.c (base) calls up into core/text/high.c (text): high"
expect include 1 "core/base/up.c: includes text/high.h: base may not include from text"
expect exe 0 "p (plugins/): no cycles, no call up a layer among 1 files"
expect exe_ninja 0 "p (plugins/): no cycles, no call up a layer among 1 files" "core (core/)"
expect stale 0 "stale (its source is gone)" "p (plugins/): no cycles"
got=0; bash "$script" "$tmp/none" core/ >/dev/null 2>&1 || got=$?
if ((got == 2)); then echo "ok   nobuild (exit 2)"
else echo "FAIL nobuild: exit $got, want 2"; fails=1; fi
# the circle test must not pass by an empty grep: the clean tree names no cycle
if bash "$script" "$tmp/clean/build" 2>&1 | grep -q "cycle [0-9]"; then
    echo "FAIL clean: a cycle reported"; fails=1
fi
exit $fails
