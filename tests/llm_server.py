"""A chat-completions server of the tests' own, on loopback: it plays back tests/data/llm_answers.json.

    python tests/llm_server.py tests/data/llm_answers.json

It binds 127.0.0.1 on a free port, prints ``PORT <n>`` on stdout and serves until killed.
``POST /v1/chat/completions`` answers by the request's ``model``: the n-th request for a model
gets that model's n-th scripted answer (the last one again once they run out). An answer is
``{"status": code, "body": json}``, ``{"hang_seconds": s}`` (no answer for ``s`` seconds, to
run a client past its timeout) or ``{"compute": name}``: a reply worked out from the request by a
rule of :data:`RULES`, no model (``echo_memories``: the recalled memories of vxmem's answer
prompt, joined; ``grade_contains``: ``{"correct": true}`` when the judge prompt's candidate answer
contains its gold answer, ignoring case), so answer-level evaluation runs deterministically.
``GET /requests`` returns every request body received, in order, and ``POST /reset`` forgets
them and rewinds every script. No model runs: see tests/data/README.md.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MEMORY_LINE = re.compile(r"^\d+\. \[[^\]]*\] (.*)$", re.MULTILINE)


def echo_memories(prompt: str) -> str:
    """The memories an answer prompt lists, joined; "I don't know." when it lists none."""
    found = MEMORY_LINE.findall(prompt)
    return " | ".join(found) if found else "I don't know."


def grade_contains(prompt: str) -> str:
    """A judge's verdict: correct when the candidate answer contains the gold answer (any case)."""
    gold = re.search(r"^Gold answer: (.*)$", prompt, re.MULTILINE)
    said = re.search(r"^Candidate answer: (.*)$", prompt, re.MULTILINE)
    ok = bool(gold and said and gold.group(1).strip().lower() in said.group(1).lower())
    return json.dumps({"correct": ok})


RULES = {"echo_memories": echo_memories, "grade_contains": grade_contains}


def computed(request: dict, rule: str) -> dict:
    """A chat.completion whose content is ``rule`` applied to the request's last message; its
    usage counts words, so the token figures are deterministic too."""
    prompt = str((request.get("messages") or [{}])[-1].get("content", ""))
    content = RULES[rule](prompt)
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split())}
    return {"id": f"chatcmpl-{rule}", "object": "chat.completion", "created": 1700000000,
            "model": request.get("model", ""), "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                                            "message": {"role": "assistant", "content": content}}],
            "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}}


class Script:
    """The scripted answers and what was asked, shared by the handler threads."""

    def __init__(self, answers: dict[str, list[dict]]):
        self.answers = answers
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.served: dict[str, int] = {}

    def next_answer(self, request: dict) -> dict:
        model = request.get("model", "")
        with self.lock:
            self.requests.append(request)
            script = self.answers.get(model)
            if not script:
                return {"status": 404, "body": {"error": {"message": f"The model `{model}` does not exist.",
                                                          "type": "invalid_request_error", "code": "model_not_found"}}}
            n = self.served.get(model, 0)
            self.served[model] = n + 1
            return script[min(n, len(script) - 1)]

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.served.clear()


def handler_for(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # quiet: the tests read /requests instead
            pass

        def send_json(self, status: int, body) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/requests":
                with script.lock:
                    self.send_json(200, list(script.requests))
            else:
                self.send_json(404, {"error": {"message": "not found"}})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/") == "/reset":
                script.reset()
                self.send_json(200, {"ok": True})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            request = json.loads(body or b"{}")
            answer = script.next_answer(request)
            if "compute" in answer:
                answer = {"status": 200, "body": computed(request, answer["compute"])}
            if "hang_seconds" in answer:
                time.sleep(answer["hang_seconds"])  # the client gave up long before
                return
            self.send_json(answer["status"], answer["body"])

    return Handler


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as f:
        script = Script(json.load(f)["models"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(script))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
