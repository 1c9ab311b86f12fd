#!/usr/bin/env python3
"""A calculator environment as an external program for builtin.exec_env (grpo's [env] section).

The same game as the C pack calc.calculator (plugins/envs/calc): a turn holding "calc: EXPR" (or a
<tool_call> named calc, parsed by grpo) gets "\\nresult: N\\n" back; a turn without a call is the
final answer, rewarded 1 when its last integer equals the row's "answer" field.

Protocol (share/doc/grpo-sdk/EXEC_PROTOCOL.md, "Environments"): one JSON request per line on
stdin, one reply per line on stdout echoing its "id":
  {"id", "type": "reset", "episode", "sample": {...}} -> {"id", "observation": null}
  {"id", "type": "step", "episode", "turn", "text", "tool_calls", "tool_error"}
      -> {"id", "observation", "done", "reward", "tool_calls", "tool_errors"}
  {"id", "type": "final", "episode"} -> {"id", "reward"}
Run file:
  [env]
  plugin = builtin.exec_env
  command = python3
  command = env-program/calc_env.py     ; relative to the run file's directory
"""
import ast
import json
import operator
import re
import sys

OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
       ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv}


def evaluate(expr):
    """Integers, + - * / and parentheses; anything else raises ValueError."""
    def walk(n):
        if isinstance(n, ast.Expression):
            return walk(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -walk(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in OPS:
            return OPS[type(n.op)](walk(n.left), walk(n.right))
        raise ValueError(expr)
    try:
        return walk(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, ZeroDivisionError) as e:
        raise ValueError(expr) from e


def the_call(req):
    """The expression of the turn's calculator call, or None; and whether it is in the text
    syntax (grpo counts the <tool_call>s it parsed itself)."""
    for call in req.get("tool_calls") or []:
        if call.get("name") == "calc":
            return str((call.get("arguments") or {}).get("expression", "")), False
    m = re.search(r"calc:([^\n]*)", req["text"])
    return (m.group(1), True) if m else (None, False)


def main():
    episodes = {}  # episode number -> {"answer": str, "correct": bool}
    for line in sys.stdin:
        req = json.loads(line)
        out = {"id": req["id"]}
        ep = req["episode"]
        if req["type"] == "reset":
            answer = req["sample"]["fields"].get("answer")
            episodes[ep] = {"answer": str(answer) if answer is not None else None, "correct": False}
            out["observation"] = None  # the task is in the prompt
        elif req["type"] == "step":
            e, (expr, own) = episodes[ep], the_call(req)
            if expr is None:  # the final answer
                numbers = re.findall(r"\d+", req["text"])
                e["correct"] = bool(numbers) and numbers[-1] == e["answer"]
                out["done"] = True
            else:
                try:
                    out["observation"] = f"\nresult: {evaluate(expr)}\n"
                    out["tool_errors"] = 0
                except ValueError:
                    out["observation"] = f"\nerror: cannot evaluate '{expr[:60]}'\n"
                    out["tool_errors"] = 1
                out["tool_calls"] = 1 if own else 0
                out["done"] = False
        else:  # final: the episode's last message
            out["reward"] = 1.0 if episodes.pop(ep)["correct"] else 0.0
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
