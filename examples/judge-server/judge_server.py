#!/usr/bin/env python3
"""A toy LLM judge behind an OpenAI-compatible chat-completions endpoint, for examples/judge.ini.

It stands in for a real judge server (vLLM, llama.cpp's llama-server, SGLang, TGI or a hosted
API) so the example runs offline: it answers POST /v1/chat/completions with a reply whose content
is "Score: N" (N out of 10), grading the arithmetic in the user message the run file's template
writes:
    Reference answer: 107
    Response: <think>...</think><answer>107</answer>
10 when the response's last <answer>...</answer> equals the reference, 2 when it has an
<answer> tag with something else in it, 0 without one. It also answers the exec protocol
(sdk/EXEC_PROTOCOL.md, a POST with {"id", "samples"}) with the same grades divided by 10, so
`mode = exec` can be tried against it too.

    python3 examples/judge-server/judge_server.py            # 127.0.0.1:8731
    python3 examples/judge-server/judge_server.py --port 9000 --api-key-env JUDGE_KEY

With --api-key-env NAME a request must carry "Authorization: Bearer $NAME" (the run file's
api_key_env sends it). It listens on 127.0.0.1 only; Ctrl-C stops it.
"""
import argparse
import json
import os
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def grade(reference, response):
    found = ANSWER.findall(response)
    if not found:
        return 0
    return 10 if found[-1].strip() == str(reference).strip() else 2


def judge(messages):
    text = messages[-1]["content"]
    ref = re.search(r"^Reference answer: (.*)$", text, re.M)
    resp = text.split("Response:", 1)[1] if "Response:" in text else ""
    if not ref:
        return "I need a reference answer to judge. Score: 0"
    return "Score: %d" % grade(ref.group(1), resp)


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        key = self.server.key
        if key and self.headers.get("Authorization") != "Bearer " + key:
            return self.reply(401, {"error": {"message": "missing or wrong API key"}})
        if "samples" in body:  # the exec protocol
            rewards = [grade(s.get("fields", {}).get("answer"), s["completion"]) / 10
                       for s in body["samples"]]
            return self.reply(200, {"id": body["id"], "rewards": rewards})
        content = judge(body["messages"])
        self.reply(200, {"object": "chat.completion", "model": body.get("model", "toy-judge"),
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": content}}]})

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=8731)
    p.add_argument("--api-key-env", help="require this environment variable's value as the key")
    a = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.key = os.environ.get(a.api_key_env, "") if a.api_key_env else ""
    if a.api_key_env and not srv.key:
        p.error("the environment variable %s is not set" % a.api_key_env)
    print("judge listening on http://127.0.0.1:%d/v1/chat/completions" % srv.server_address[1],
          flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
