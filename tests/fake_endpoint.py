"""A fake OpenAI-compatible endpoint on the loopback address (what vLLM, SGLang and llama.cpp's server answer),
for the tests of the frozen remote simulator (``env.backend=openai``): ``from fake_endpoint import endpoint``."""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Endpoint(BaseHTTPRequestHandler):
    """/v1/chat/completions: writes the seed task of the prompt with its operands swapped (a valid addition
    task); ``mode`` 'error' answers 500, 'slow' answers after 2 s, 'garbage' with text no domain parses."""
    mode = "ok"
    requests: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body, "auth": self.headers.get("Authorization")})
        if self.mode == "error":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "model crashed"}}')
            return
        if self.mode == "slow":
            time.sleep(2)
        seed = re.search(r"(\d+)\+(\d+)", body["messages"][0]["content"])
        text = f"{seed.group(2)}+{seed.group(1)}" if self.mode == "ok" else "<think>hmm</think>"
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text}}]}
        payload = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except BrokenPipeError:   # 'slow': the client gave up first
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    Endpoint.mode, Endpoint.requests = "ok", []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
