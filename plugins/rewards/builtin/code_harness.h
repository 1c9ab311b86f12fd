/*
 * code_harness.h — the fixed Python program builtin.code runs in the sandbox (python -c, argv[1]
 * the mode). It reads the solution from fd 3 and the tests from fd 4 and closes both.
 *
 * io:      runs the solution as __main__; the test's input is its stdin, its stdout the answer.
 * asserts: fd 4 holds a nonce line, then Python statements. The harness parses them first (one
 *          test per top-level statement) and writes "\nNONCE total N\n" (or "\nNONCE bad\n" when
 *          they do not parse); then it runs the solution, then each statement in the solution's
 *          namespace, writing "\nNONCE pass I\n" through its own copy of stdout for each one that
 *          raised nothing. A solution that raises (or exits) passes nothing. The nonce keeps a
 *          solution from printing passes; one that digs the nonce out of the harness's frames
 *          could still forge them: the sandbox bounds what a program can do to the host, not how
 *          it games its own score.
 */
#ifndef GRPO_BUILTIN_CODE_HARNESS_H
#define GRPO_BUILTIN_CODE_HARNESS_H

#define CODE_HARNESS_PY                                                                  \
    "import os, sys\n"                                                                   \
    "def _grpo_harness(mode):\n"                                                         \
    "    def take(fd):\n"                                                                \
    "        parts = []\n"                                                               \
    "        while True:\n"                                                              \
    "            b = os.read(fd, 65536)\n"                                               \
    "            if not b:\n"                                                            \
    "                break\n"                                                            \
    "            parts.append(b)\n"                                                      \
    "        os.close(fd)\n"                                                             \
    "        return b''.join(parts).decode('utf-8', 'replace')\n"                        \
    "    code, tests = take(3), take(4)\n"                                               \
    "    g = {'__name__': '__main__', '__builtins__': __builtins__}\n"                   \
    "    if mode == 'io':\n"                                                             \
    "        del tests\n"                                                                \
    "        exec(compile(code, 'solution.py', 'exec'), g)\n"                            \
    "        return\n"                                                                   \
    "    import ast\n"                                                                   \
    "    nonce, _, source = tests.partition('\\n')\n"                                    \
    "    out = os.dup(1)\n"                                                              \
    "    say = lambda text: os.write(out, ('\\n%s %s\\n' % (nonce, text)).encode())\n"   \
    "    try:\n"                                                                         \
    "        body = ast.parse(source).body\n"                                            \
    "    except (SyntaxError, ValueError):\n"                                            \
    "        say('bad')\n"                                                               \
    "        return\n"                                                                   \
    "    say('total %d' % len(body))\n"                                                  \
    "    try:\n"                                                                         \
    "        exec(compile(code, 'solution.py', 'exec'), g)\n"                            \
    "    except BaseException:\n"                                                        \
    "        return\n"                                                                   \
    "    for i, stmt in enumerate(body):\n"                                              \
    "        try:\n"                                                                     \
    "            exec(compile(ast.Module([stmt], []), 'tests.py', 'exec'), g)\n"         \
    "        except BaseException:\n"                                                    \
    "            continue\n"                                                             \
    "        say('pass %d' % i)\n"                                                       \
    "_grpo_harness(sys.argv[1])\n"

#endif
