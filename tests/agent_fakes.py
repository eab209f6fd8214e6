"""A fake OpenAI-compatible Chat Completions server on 127.0.0.1 that replays scripted replies."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeChatServer:
    """Each script item is a reply text (finish_reason "stop"), a (text, finish_reason) pair, or an
    int HTTP status to answer with an error. Received request bodies are kept in `requests`."""

    def __init__(self, script: list):
        self.script = list(script)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                return None

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append({"path": self.path, "body": body})
                item = outer.script.pop(0) if outer.script else 500
                if isinstance(item, int):
                    data = json.dumps({"error": {"message": "scripted failure", "type": "server_error"}}).encode()
                    self.send_response(item)
                else:
                    text, finish = item if isinstance(item, tuple) else (item, "stop")
                    data = json.dumps({
                        "id": f"fake-{len(outer.requests)}", "object": "chat.completion", "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": finish}],
                        "usage": {"prompt_tokens": 100 + len(outer.requests), "completion_tokens": 10,
                                  "total_tokens": 110 + len(outer.requests)},
                    }).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def user_prompts(self) -> list[str]:
        return [m["content"] for r in self.requests for m in r["body"].get("messages", []) if m["role"] == "user"]
