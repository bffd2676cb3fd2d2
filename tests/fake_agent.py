"""A fake chat model on the loopback address for the curriculum tests: it answers a fixed-width addition prompt
(genenv's addition domain: reversed, zero-padded operands) right when both operands have at most two digits, and
'0' otherwise, so that the agent's success depends on the task's level."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(text: str) -> str:
    found = re.search(r"([0-9]+)\+([0-9]+)=", text)
    if not found:
        return "0"
    left, right = found.group(1), found.group(2)
    a, b = int(left[::-1]), int(right[::-1])
    if max(len(str(a)), len(str(b))) > 2:
        return "0"
    return str(a + b).zfill(len(left) + 1)[::-1]


class Agent(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = " ".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user")
        content = answer(text)
        if body.get("stream"):   # server-sent events, as OpenAI-compatible servers stream a chat completion
            chunks = [{"role": "assistant", "content": content}, {}]
            events = [{"id": "x", "object": "chat.completion.chunk", "created": 0, "model": body.get("model", "fake"),
                       "choices": [{"index": 0, "delta": delta, "finish_reason": None if delta else "stop"}]}
                      for delta in chunks]
            events[-1]["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            payload = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
            self._send(payload.encode(), "text/event-stream")
            return
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self._send(json.dumps(reply).encode(), "application/json")

    def _send(self, payload: bytes, kind: str):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def serve() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


if __name__ == "__main__":   # (by hand: prints its address and serves for an hour)
    import time
    server, url = serve()
    print(url, flush=True)
    time.sleep(3600)
