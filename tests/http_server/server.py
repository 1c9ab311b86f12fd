#!/usr/bin/env python3
"""tests/http_server/server.py — the local HTTP server the builtin.http tests talk to.

Binds 127.0.0.1 on a free port (port 0) and prints that port as its first stdout line. Answers
POSTs on any path: a body with "samples" is the exec protocol (sdk/EXEC_PROTOCOL.md; the reward
of a sample is the length of its completion, null for the completion "none"), a body with
"messages" is a chat-completions judge request (the reply's content is
'Verdict: {"score": X}' where X is the completion when it is a number, else 'I cannot tell.';
the completion is read from the line "C=..." of the user message).

--mode picks a behaviour: ok, slow (sleep --delay s, then ok), fail_then_ok (HTTP 500 for the
first --n requests), 429_then_ok (429 with Retry-After: --retry-after for the first --n), always
500, garbage (200 with a body that is not JSON), drop (close the connection without a reply),
hang (never answer), badreq (400). It exits when the process that started it does (or after
--max-seconds). --key K: a request without "Authorization: Bearer K" gets 401,
whose body echoes the header it got after --echo-pad dots (so a test can check the client never
logs the key, not even a piece of it where a message cuts the body short).
--log FILE: one JSON line per request: {"n", "inflight", "body" (parsed), "auth"} where auth says
whether the key matched (the key itself is not written).
"""
import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"n": 0, "inflight": 0}


def judge_content(body):
    content = body["messages"][-1]["content"]
    m = re.search(r"^C=(.*)$", content, re.M)
    c = m.group(1) if m else ""
    try:
        float(c)
        return 'Verdict: {"score": %s}' % c
    except ValueError:
        return "I cannot tell."


def parsed(raw):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def exec_reply(body):
    rewards = [None if s["completion"] == "none" else len(s["completion"])
               for s in body["samples"]]
    return {"id": body["id"], "rewards": rewards}


class Handler(BaseHTTPRequestHandler):
    counted = False  # this request is in state["inflight"] (leave() takes it out once)

    def log_message(self, *args):
        pass

    def send(self, code, text, headers=()):
        data = text.encode()
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.leave()  # before the body: the client cannot start its next request before this
        self.end_headers()
        self.wfile.write(data)

    def leave(self):
        """Counts this request out of "inflight" (once). It must happen before the reply can
        reach the client: counted after, the client's next request may arrive first and the
        log would show one more in flight than the client ever had."""
        with lock:
            if self.counted:
                state["inflight"] -= 1
                self.counted = False

    def do_POST(self):
        a = self.server.args
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        auth = self.headers.get("Authorization", "")
        with lock:
            state["n"] += 1
            state["inflight"] += 1
            self.counted = True
            n, inflight = state["n"], state["inflight"]
            if a.log:
                with open(a.log, "a") as f:
                    f.write(json.dumps({"n": n, "inflight": inflight, "body": parsed(raw),
                                        "auth": a.key is None or auth == "Bearer " + a.key}) + "\n")
        try:
            self.answer(a, raw, auth, n)
        finally:
            self.leave()

    def answer(self, a, raw, auth, n):
        if a.key is not None and auth != "Bearer " + a.key:
            return self.send(401, json.dumps({"error": "." * a.echo_pad + "bad key: " + auth}))
        mode = a.mode
        if mode == "hang":
            time.sleep(3600)
        if mode == "drop":
            self.close_connection = True
            return
        if mode == "500" or (mode == "fail_then_ok" and n <= a.n):
            return self.send(500, "internal error")
        if mode == "429_then_ok" and n <= a.n:
            return self.send(429, "slow down", [("Retry-After", str(a.retry_after))])
        if mode == "badreq":
            return self.send(400, "bad request")
        if mode == "garbage":
            return self.send(200, "this is {not json")
        if mode == "slow":
            time.sleep(a.delay)
        body = json.loads(raw)
        if "messages" in body:
            reply = {"id": "c1", "object": "chat.completion", "model": body.get("model"),
                     "choices": [{"index": 0, "finish_reason": "stop", "message":
                                  {"role": "assistant", "content": judge_content(body)}}]}
        else:
            reply = exec_reply(body)
        self.send(200, json.dumps(reply))


def watchdog(limit):
    """Exits when the test that started the server is gone (a failed test skips its teardown),
    and after limit seconds in any case, so no server outlives its test."""
    parent, start = os.getppid(), time.monotonic()
    while os.getppid() == parent and time.monotonic() - start < limit:
        time.sleep(0.2)
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="ok")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--retry-after", type=int, default=0)
    p.add_argument("--key")
    p.add_argument("--echo-pad", type=int, default=0)
    p.add_argument("--log")
    p.add_argument("--max-seconds", type=float, default=300)
    args = p.parse_args()
    threading.Thread(target=watchdog, args=(args.max_seconds,), daemon=True).start()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.args = args
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
