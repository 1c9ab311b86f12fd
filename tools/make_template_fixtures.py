#!/usr/bin/env python3
"""Renders chat templates with transformers' own renderer and writes the expected outputs.

Writes tests/fixtures/template/cases.json, read by tests/test_chat_template.c, which renders
the same conversations with our C interpreter and compares byte for byte.

The reference is transformers.utils.chat_template_utils.render_jinja_template, the function
apply_chat_template calls: jinja2 ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with the AssistantTracker ({% generation %}) and loopcontrols extensions,
tojson = json.dumps(ensure_ascii=False), raise_exception/strftime_now/namespace/dict globals.
Messages go through the same normalisation apply_chat_template applies first
(_normalize_chat_messages: keys whose value is None are dropped). Special tokens are passed as
apply_chat_template passes them (bos_token/eos_token from the tokenizer config).

Templates:
  minimind2_jinja   $SHARED/data/minimind2/chat_template_2504.jinja
  minimind2_config  $SHARED/data/minimind2/tokenizer_config.json  ("chat_template")
  minimind3_jinja   $SHARED/data/minimind3/chat_template.jinja
  minimind3_config  $SHARED/data/minimind3/tokenizer_config.json  ("chat_template")
  chatml            the built-in ChatML template (core/text/chat_template.c), copied below
  qwen2.5           tests/fixtures/template/qwen2.5-7b-instruct.jinja (see README there)
  qwen3             tests/fixtures/template/qwen3-0.6b.jinja (see README there)

Usage: python3 tools/make_template_fixtures.py [--shared DIR]   (default: ../shared beside the project)
"""
import argparse
import hashlib
import json
import os

from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXDIR = os.path.join(ROOT, "tests", "fixtures", "template")

# The same text as grpo_chat_template_chatml() in core/text/chat_template.c.
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}"
)

SPECIAL = (
    "Quotes ' \" and backslash \\ and braces {{ x }} {% if %} {# c #}\n"
    "tabs\tand  double  spaces, trailing spaces   \n\n"
    "Unicode: 你好，世界！\u3000全角空格\u3000 émoji 🚀 — “curly” ≠ ascii\n"
    "Control: \x01\x7f end"
)

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "What is 2 + 3?"}],
    "system_user": [
        {"role": "system", "content": "You are a careful math tutor."},
        {"role": "user", "content": "Compute 17 * 23. Put the answer in <answer></answer>."},
    ],
    "multi_turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "Name a prime number."},
    ],
    "multi_turn_no_system": [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer"},
        {"role": "user", "content": "Second question"},
        {"role": "assistant", "content": "Second answer"},
    ],
    "special_chars": [
        {"role": "system", "content": SPECIAL},
        {"role": "user", "content": "  leading and trailing whitespace \n"},
    ],
    "newlines": [
        {"role": "user", "content": "\n\nline one\nline two\r\nline three\n\n"},
        {"role": "assistant", "content": "\nanswer with\nnewlines\n"},
        {"role": "user", "content": "ok"},
    ],
    "think_in_content": [
        {"role": "user", "content": "Solve x + 1 = 3."},
        {"role": "assistant", "content": "<think>\nx = 3 - 1\n</think>\n\nx = 2"},
        {"role": "user", "content": "And x + 2 = 3?"},
        {"role": "assistant", "content": "<think>\n\nsubtract 2\n\n</think>\n\n\nx = 1"},
    ],
    "reasoning_field": [
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": "Rayleigh scattering.", "reasoning_content": "\nshort wavelengths scatter more\n"},
    ],
    "empty_content": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
    ],
    "chinese": [
        {"role": "system", "content": "你是一个乐于助人的助手。"},
        {"role": "user", "content": "请用一句话介绍你自己。"},
        {"role": "assistant", "content": "我是MiniMind，一个小型语言模型。"},
        {"role": "user", "content": "１＋１＝？"},
    ],
    "tool_round_trip": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "units": "°C", "ratio": 0.5, "flags": [True, None]}}}
            ],
        },
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "<tool_response>second</tool_response>"},
        {"role": "assistant", "content": "It is 21 °C."},
    ],
    "tool_response_user": [
        {"role": "user", "content": "Start"},
        {"role": "assistant", "content": "<think>plan</think>Calling."},
        {"role": "user", "content": "<tool_response>\nresult\n</tool_response>"},
        {"role": "assistant", "content": "<think>\ndone\n</think>\n\nFinal."},
    ],
    "missing_content": [
        {"role": "user", "content": None},
    ],
    "null_field": [
        {"role": "user", "content": "Keys with null values are dropped.", "name": None},
    ],
}



def random_conversations(count, seed=20260):
    """Deterministic random conversations built from tricky pieces of text."""
    import random
    rnd = random.Random(seed)
    pieces = ["hello", " ", "  ", "\n", "\n\n", "\t", "<think>", "</think>", "<tool_response>",
              "</tool_response>", "{{", "}}", "{%", "%}", "'", '"', "\\", "数学", "\u3000", "🙂", "é",
              "<|im_end|>", "<|im_start|>", "answer: 42", "\r\n", "x" * 40]
    convs = {}
    for k in range(count):
        msgs = []
        if rnd.random() < 0.5:
            msgs.append({"role": "system", "content": "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))})
        for turn in range(rnd.randint(1, 4)):
            for role in ("user", "assistant"):
                msgs.append({"role": role, "content": "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8)))})
        if rnd.random() < 0.5:
            msgs.pop()  # end on a user turn
        convs[f"random_{k}"] = msgs
    return convs


CONVERSATIONS.update(random_conversations(12))

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather for a city — “quoted” \\ and \"escaped\"",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
                "required": ["city"],
            },
        },
    }
]

# (template name, conversation ids, the extra variables to try)
NO_VARS = [{}]
THINKING = [{}, {"enable_thinking": True}, {"enable_thinking": False}]
OPEN_THINKING = [{}, {"open_thinking": True}, {"open_thinking": False}]
ALL = list(CONVERSATIONS)


def load_templates(shared):
    data = os.path.join(shared, "data")
    out = []

    def config_template(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    for name, rel, kind, var_sets in [
        ("minimind2_jinja", "minimind2/chat_template_2504.jinja", "jinja", NO_VARS),
        ("minimind2_config", "minimind2/tokenizer_config.json", "config", THINKING),
        ("minimind3_jinja", "minimind3/chat_template.jinja", "jinja", OPEN_THINKING),
        ("minimind3_config", "minimind3/tokenizer_config.json", "config", OPEN_THINKING),
    ]:
        path = os.path.join(data, rel)
        if kind == "jinja":
            with open(path, encoding="utf-8") as f:
                text = f.read()
            cfg = config_template(os.path.join(os.path.dirname(path), "tokenizer_config.json"))
        else:
            cfg = config_template(path)
            text = cfg["chat_template"]
        out.append(dict(name=name, source="shared:data/" + rel, text=text, var_sets=var_sets,
                        bos_token=cfg.get("bos_token"), eos_token=cfg.get("eos_token")))
    out.append(dict(name="chatml", source="builtin:chatml", text=CHATML, var_sets=NO_VARS,
                    bos_token=None, eos_token=None))
    for name, fn, var_sets in [("qwen2.5", "qwen2.5-7b-instruct.jinja", NO_VARS),
                               ("qwen3", "qwen3-0.6b.jinja", THINKING)]:
        with open(os.path.join(FIXDIR, fn), encoding="utf-8") as f:
            text = f.read()
        out.append(dict(name=name, source="fixture:" + fn, text=text, var_sets=var_sets,
                        bos_token=None, eos_token="<|im_end|>"))
    return out


def render(tpl, messages, add_generation_prompt, variables, tools):
    kwargs = dict(variables)
    for k in ("bos_token", "eos_token"):
        if tpl[k] is not None:
            kwargs[k] = tpl[k]
    chat = _normalize_chat_messages(messages)
    try:
        rendered, _ = render_jinja_template(
            conversations=[chat], tools=tools, chat_template=tpl["text"],
            add_generation_prompt=add_generation_prompt, **kwargs)
        return {"expected": rendered[0]}
    except Exception as e:  # the template refuses this conversation: we must refuse it too
        return {"error": f"{type(e).__name__}: {e}"}


# Small templates exercising one feature each, rendered by the same environment. A snippet may
# also be expected to fail (then only the failure is checked).
SNIPPETS = [
    ("text", "plain text\n", {}),
    ("trailing_newline_kept_once", "a\n\n", {}),
    ("crlf", "a\r\nb\rc{% if true %}\r\nx{% endif %}\r\n", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nend", {}),
    ("lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\n  {# c #}\nd", {}),
    ("lstrip_not_var", "x\n   {{ 1 }}\n", {}),
    ("lstrip_plus", "x\n   {%+ if true %}y{% endif %}", {}),
    ("trim_plus", "{% if true +%}\ny{% endif %}", {}),
    ("dash_control", "a  \n  {{- 'b' -}}  \n  c {%- if true -%}  d  {%- endif -%}\n e", {}),
    ("comment_dash", "a {#- c -#} b {# d #}\ne", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}!", {}),
    ("unicode_ws_strip", "a\u3000 {{- 'b' }}", {}),
    ("int_float_print", "{{ 1 }} {{ 1.0 }} {{ 1.5e-7 }} {{ 1e16 }} {{ 123456789.125 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }}", {}),
    ("none_bool_print", "{{ none }} {{ true }} {{ false }} {{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': 1} }} {{ (1,) }} {{ ('a', \"b'c\") }}", {}),
    ("undefined_print", "[{{ nothing }}][{{ nothing is defined }}][{{ nothing|length }}][{% for x in nothing %}x{% endfor %}][{{ none.attr is defined }}]", {}),
    ("string_escapes", "{{ 'a\\tb\\\\c\\'d' }}|{{ \"e\\\"f\\u00e9\\x41\" }}|{{ 'unknown \\d escape' }}", {}),
    ("concat", "{{ 'a' ~ 1 ~ none ~ nothing ~ 2.0 }} {{ 'x' + 'y' }} {{ [1] + [2] }}", {}),
    ("compare", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ none == none }}", {}),
    ("in_ops", "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in nothing }}", {}),
    ("logic", "{{ 1 and 'x' }} {{ 0 or 'y' }} {{ not 0 }} {{ '' or [] }} {{ none and 1 }} {{ 'a' if false else 'b' }} [{{ 'a' if false }}]", {}),
    ("attr_item", "{{ m.role }} {{ m['role'] }} {{ m.get('x', 'dflt') }} {{ m.get('role') }} {{ m.missing is defined }} {{ d['items'] }} {{ d.items()|list }}", {"m": {"role": "user"}, "d": {"items": 5}}),
    ("negative_index", "{{ xs[-1] }} {{ xs[0] }} {{ xs[5] is defined }} {{ 'héllo'[1] }} {{ 'abc'[-1] }}", {"xs": [1, 2, 3]}),
    ("slices", "{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[5:] }} {{ 'héllo wörld'[::-1] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ 'abc'[::-2] }}", {"xs": [1, 2, 3, 4]}),
    ("str_methods", "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\na\\n'.lstrip('\\n') }}|{{ 'a\\n\\n'.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ 'x'.startswith('x') }} {{ 'xy'.endswith(('z', 'y')) }}", {}),
    ("split_think", "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[-1].lstrip('\\n') }}", {"c": "<think>\nr\n</think>\n\nanswer"}),
    ("filters", "{{ xs|length }} {{ 'héllo'|length }} {{ '  t  '|trim }} {{ nothing|default('d') }} {{ ''|default('e', true) }} {{ xs|first }} {{ xs|last }} {{ xs|join('+') }} {{ 'a'|upper }} {{ xs|reverse|list }} {{ 'ab'|list }} {{ '3'|int + 1 }} {{ '2.5'|float }} {{ -3|abs }} {{ xs|sum }} {{ 'Ab aB'|lower }} {{ 'a b'|title }} {{ 2.567|round(2) }} {{ 'abc'|replace('b', 'x') }} {{ 5|string ~ 'x' }} {{ 'a b c'|wordcount }}", {"xs": [3, 1, 2]}),
    ("filters_seq", "{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ['b', 'A', 'a']|sort }} {{ ['a', 'A', 'b']|unique|list }} {{ ms|map(attribute='role')|list }} {{ ms|selectattr('role', 'equalto', 'user')|list|length }} {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='role')|join(',') }} {{ [0, 1, 2]|select|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ d|items|list }} {{ d|dictsort }}", {"xs": [3, 1, 2], "ms": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}], "d": {"b": 1, "a": 2}}),
    ("tojson", "{{ v|tojson }}|{{ v|tojson(indent=2) }}|{{ v|tojson(indent='\\t', separators=(';', '=')) }}|{{ v|tojson(separators=(',', ':')) }}|{{ [1, {}]|tojson(indent=0) }}|{{ 'é'|tojson(1) }}|{{ s|tojson }}|{{ {'z': 1, 'a': [true, none]}|tojson(sort_keys=true) }}|{{ 1.0|tojson }} {{ 'é\\n\\u0001<>&'|tojson }} {{ v|tojson(ensure_ascii=true) }} {{ '🙂x'|tojson(ensure_ascii=true) }}", {"v": {"a": [1, 2.5, None, True, "x\"y"], "b": {}, "c": [], "é": "ü"}, "s": "tab\there"}),
    ("tests", "{{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ true is integer }} {{ 'a' is string }} {{ none is none }} {{ x is defined }} {{ x is undefined }} {{ {} is mapping }} {{ [] is iterable }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 1 is sameas true }} {{ true is sameas true }} {{ 'a' is in 'abc' }} {{ 2 is eq 2 }} {{ 'A' is upper }} {{ false is false }} {{ 0 is false }} {{ true is true }} {{ 1 is not none }}", {}),
    ("for_loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("for_else_filter", "{% for x in [] %}x{% else %}empty{% endfor %} {% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for c in 'ab' %}[{{ c }}]{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"xs": [1, 2, 3], "d": {"p": 1, "q": 2}}),
    ("loop_controls", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %} {{ range(3)|list }} {{ range(1, 7, 2)|list }}", {}),
    ("scoping", "{% set x = 'outer' %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}{{ x }}{% if true %}{% set y = 'if-leaks' %}{% endif %}{{ y }}{% for i in [1] %}{% set z = 1 %}{% endfor %}[{{ z }}]", {}),
    ("namespace", "{% set ns = namespace(n=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.n }} {{ ns.found }}", {}),
    ("set_forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t %}block {{ a }}{% endset %}{{ t }} {% set d = dict(k=1, j='x') %}{{ d.k }}{{ d['j'] }} {% set l = [1, 2] + [3] %}{{ l }}", {}),
    ("nested_loops", "{% for m in ms %}{% for c in m.content %}{{ loop.index }}{{ c }}{% endfor %}|{{ loop.index }}{% endfor %}", {"ms": [{"content": "ab"}, {"content": "c"}]}),
    ("generation_tag", "{% for m in ms %}{% generation %}{{ m }}{% endgeneration %}{% endfor %}", {"ms": ["a", "b"]}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ xs|length - 1 }} {{ 'a' ~ (1 + 2) }} {{ 1 ~ 2 * 3 }} {{ not 1 == 2 }} {{ 1 if 0 else 2 if 1 else 3 }}", {"xs": [1, 2]}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }} [{{ greet() }}]", {}),
    ("macro_scope", "{% set g = 'G' %}{% macro m(x) %}{% set y = x ~ g %}{{ y }}{% for i in [1] %}{{ loop.index }}{% endfor %}{% endmacro %}{{ m(1) }}[{{ y }}]{{ m(2) ~ m(3) }}", {}),
    ("macro_whitespace", "{% macro item(x) -%}\n  <{{ x }}>\n{%- endmacro %}\n{% for x in [1, 2] %}\n{{ item(x) }}\n{% endfor %}", {}),
    ("title_and_round", "{{ \"they're here-now (ok) x1y\"|title }}|{{ \"they're here-now x1y\".title() }}|{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 5|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ -0.5|round }}|{{ '0x1A'|int }} {{ ' 7 '|int }} {{ '3.9'|int }} {{ '1e3'|int }}", {}),
    ("concat_binds_tighter_than_plus", "{{ 'a' ~ 1 + 2 }}", {}),
    ("raise_exception", "{% if true %}{{ raise_exception('bad role: ' ~ r) }}{% endif %}", {"r": "robot"}),
    ("undefined_plus", "{{ nothing + 'x' }}", {}),
    ("undefined_attr", "{{ nothing.attr }}", {}),
    ("str_plus_int", "{{ 'x' + 1 }}", {}),
    ("not_iterable", "{% for x in 5 %}{% endfor %}", {}),
]


def render_snippets():
    from transformers.utils.chat_template_utils import _compile_jinja_template
    out = []
    for name, text, variables in SNIPPETS:
        try:
            out.append(dict(name=name, template=text, vars=variables,
                            expected=_compile_jinja_template(text).render(**variables)))
        except Exception as e:
            out.append(dict(name=name, template=text, vars=variables,
                            error=f"{type(e).__name__}: {e}"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    args = ap.parse_args()
    templates = load_templates(args.shared)
    cases = []
    for tpl in templates:
        for conv in ALL:
            for agp in (False, True):
                for variables in tpl["var_sets"]:
                    case = dict(template=tpl["name"], conversation=conv, add_generation_prompt=agp,
                                vars=variables)
                    case.update(render(tpl, CONVERSATIONS[conv], agp, variables, None))
                    cases.append(case)
        # a few renders with a tool list (exercises tojson of the schemas)
        for conv in ("system_user", "tool_round_trip"):
            case = dict(template=tpl["name"], conversation=conv, add_generation_prompt=True,
                        vars={}, tools=TOOLS)
            case.update(render(tpl, CONVERSATIONS[conv], True, {}, TOOLS))
            cases.append(case)
    doc = {
        "generator": "tools/make_template_fixtures.py (transformers render_jinja_template)",
        "templates": [
            {"name": t["name"], "source": t["source"],
             "sha256": hashlib.sha256(t["text"].encode("utf-8")).hexdigest(),
             "bos_token": t["bos_token"], "eos_token": t["eos_token"]}
            for t in templates
        ],
        "conversations": CONVERSATIONS,
        "cases": cases,
        "snippets": render_snippets(),
    }
    path = os.path.join(FIXDIR, "cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in c for c in cases)
    print(f"wrote {path}: {len(cases)} cases ({n_err} expected errors), {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
