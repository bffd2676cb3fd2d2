"""A Hugging Face Hub of one repository on 127.0.0.1, for the hub-id tests: the API's repository info and file
tree and the files' resolve URLs, as much of the Hub as ``huggingface_hub.snapshot_download`` asks for, so that the
local cache is laid out by huggingface_hub itself (nothing leaves the machine). Another repository is a 404."""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FakeHub:
    def __init__(self, folder: Path, repo_id: str, commit: str):
        self.repo_id, self.commit, self.requests = repo_id, commit, []
        self.files = {p.relative_to(folder).as_posix(): p.read_bytes()
                      for p in sorted(Path(folder).rglob("*")) if p.is_file()}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub.requests.append(("HEAD", self.path))
                self._file(body=False)

            def do_GET(self):
                hub.requests.append(("GET", self.path))
                path = self.path.split("?")[0]
                if path.startswith(f"/api/models/{hub.repo_id}/tree/"):
                    self._json([{"type": "file", "path": name, "size": len(data),
                                 "oid": hashlib.sha1(data).hexdigest()} for name, data in hub.files.items()])
                elif path == f"/api/models/{hub.repo_id}" or path.startswith(f"/api/models/{hub.repo_id}/revision/"):
                    self._json({"id": hub.repo_id, "modelId": hub.repo_id, "sha": hub.commit, "private": False,
                                "siblings": [{"rfilename": name} for name in hub.files]})
                else:
                    self._file(body=True)

            def _json(self, value):
                body = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, body: bool):
                prefix = f"/{hub.repo_id}/resolve/"
                path = self.path.split("?")[0]
                name = path[len(prefix):].partition("/")[2] if path.startswith(prefix) else None
                if name not in hub.files:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "RepoNotFound" if name is None else "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = hub.files[name]
                self.send_response(200)
                self.send_header("X-Repo-Commit", hub.commit)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
