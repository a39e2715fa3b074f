#!/usr/bin/python3
"""A scripted stand-in for llama-server, for the browser harness (run.mjs).

The governor starts it exactly as it starts llama-server (`labfy model
start`): confined, with no network, a cleared environment and
llama-server's arguments (`-m /proc/self/fd/3 --host /run/model/model.sock
-c N ...`). Only `--host` (a Unix socket when it ends in `.sock`, as for
llama-server) and `--port` matter here; the rest is accepted and ignored.

It serves:

- `GET /health`: 200 `{"status": "ok"}`;
- `POST /v1/chat/completions`: the next answer of a script, as an
  OpenAI-compatible chat completion.

It takes no environment and no extra argument, so its control file sits next
to the program itself (the harness copies this file into its temp dir), and
its reports go to its private `/tmp` when it runs confined (its own
directory is read-only there, and it runs as uid 65534); the harness, root,
reads them through `/proc/<pid>/root/tmp`:

- `script.json` (written by the harness, atomically, before each step):
  `{"generation": "<id>", "answers": [{"content": "...", "delay_ms": 0,
  "finish_reason": "stop"}, ...]}`. Answers are consumed in order across
  requests; a new `generation` restarts at the first answer. In `content`,
  `{{investigation}}` becomes the investigation id the request's user
  message names (`Enquête : investigation:<uuid>`). With no answer left the
  request gets a 500 (`script exhausted`).
- `requests.jsonl` (appended): one line per chat request received,
  `{"generation", "index", "at", "body"}`, before any delay.
- `answers.jsonl` (appended): one line per answer once it was written (or
  failed to be, e.g. the client hung up on a cancelled turn),
  `{"generation", "index", "at", "delivered", "error"}`.
- `started.json` (written at start): `{"argv", "pid", "model_magic"}`, the
  arguments it was given and the first 4 bytes of `/proc/self/fd/3` (the
  model file the governor checked and handed over: `GGUF`).
"""

import json
import os
import re
import signal
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "script.json")
OUT = HERE if os.access(HERE, os.W_OK) else "/tmp"
REQUESTS = os.path.join(OUT, "requests.jsonl")
ANSWERS = os.path.join(OUT, "answers.jsonl")
STARTED = os.path.join(OUT, "started.json")
MAX_BODY = 2 * 1024 * 1024
MAX_DELAY_MS = 60_000
INVESTIGATION = re.compile(r"Enquête : (investigation:[0-9a-f-]{36})")

lock = threading.Lock()
state = {"generation": None, "next": 0}


def append(path, record):
    line = json.dumps(record, ensure_ascii=False) + "\n"
    with lock:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)


def load_script():
    try:
        with open(SCRIPT, encoding="utf-8") as f:
            script = json.load(f)
    except (OSError, ValueError):
        return None, []
    answers = script.get("answers")
    return script.get("generation"), answers if isinstance(answers, list) else []


def next_answer():
    """The script's next answer (or None), its generation and index."""
    generation, answers = load_script()
    with lock:
        if generation != state["generation"]:
            state["generation"] = generation
            state["next"] = 0
        index = state["next"]
        state["next"] += 1
    answer = answers[index] if index < len(answers) else None
    return generation, index, answer


def investigation_of(body):
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            found = INVESTIGATION.search(str(message.get("content", "")))
            if found:
                return found.group(1)
    return "investigation:not-found"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-llama-server/1"

    def log_message(self, fmt, *args):  # one short line per request, on stderr
        sys.stderr.write("fake-llama-server: " + (fmt % args) + "\n")

    def send_json(self, status, value):
        data = json.dumps(value, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        if self.path == "/health":
            self.send_json(200, {"status": "ok"})
        else:
            self.send_json(404, {"error": {"message": "not found", "type": "not_found_error"}})

    def do_POST(self):
        if self.path != "/v1/chat/completions":
            self.send_json(404, {"error": {"message": "not found", "type": "not_found_error"}})
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.send_json(400, {"error": {"message": "bad Content-Length", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
        except ValueError as e:
            self.send_json(400, {"error": {"message": f"not JSON: {e}", "type": "invalid_request_error"}})
            return
        if not isinstance(body, dict):
            body = {"_not_an_object": body}
        generation, index, answer = next_answer()
        append(REQUESTS, {"generation": generation, "index": index, "at": time.time(), "body": body})
        if not isinstance(answer, dict):
            self.send_json(500, {"error": {"message": "fake-llama-server: script exhausted", "type": "server_error"}})
            append(ANSWERS, {"generation": generation, "index": index, "at": time.time(), "delivered": False,
                             "error": "script exhausted"})
            return
        delay = min(max(int(answer.get("delay_ms") or 0), 0), MAX_DELAY_MS)
        if delay:
            time.sleep(delay / 1000)
        content = str(answer.get("content", "")).replace("{{investigation}}", investigation_of(body))
        completion = {
            "id": f"chatcmpl-fake-{generation}-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": answer.get("finish_reason", "stop"),
            }],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        error = None
        try:
            self.send_json(200, completion)
        except OSError as e:  # the client hung up (a cancelled turn)
            error = f"{type(e).__name__}: {e}"
        append(ANSWERS, {"generation": generation, "index": index, "at": time.time(),
                         "delivered": error is None, "error": error})


def arg(argv, name, default):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def model_magic():
    try:
        with open("/proc/self/fd/3", "rb") as f:
            return f.read(4).decode("latin-1")
    except OSError as e:
        return f"unreadable: {e}"


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """HTTP on a Unix socket: the peer has no address, so the handler is
    given a stand-in one."""

    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)


def main(argv):
    with open(STARTED, "w", encoding="utf-8") as f:
        json.dump({"argv": argv, "pid": os.getpid(), "model_magic": model_magic()}, f)
    host = arg(argv, "--host", "127.0.0.1")
    port = int(arg(argv, "--port", "0"))
    if host.endswith(".sock"):
        server = UnixHTTPServer(host, Handler)
        where = f"unix:{host}"
    else:
        server = ThreadingHTTPServer((host, port), Handler)
        where = f"{host}:{server.server_address[1]}"
    server.daemon_threads = True
    sys.stderr.write(f"fake-llama-server: listening on {where}, control dir {HERE}\n")
    sys.stderr.flush()
    # PID 1 of its own PID namespace when confined: a signal without a
    # handler is ignored there, so SIGTERM (the governor's stop) gets one,
    # as llama-server has.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
