"""The gateway (task ssrf-vault): fetches any URL it is given (SSRF)."""
import html
import os
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

VAULT_URL = os.environ.get("VAULT_URL", "http://vault:9000")

INDEX = """<!doctype html><title>Link preview gateway</title>
<h1>Link preview gateway</h1>
<form action="/fetch"><input name="url" size="60" placeholder="http://example.com/">
<button>Preview</button></form>
"""


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, body, ctype="text/html; charset=utf-8"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/health":
            return self.reply(200, "ok\n", "text/plain")
        if u.path == "/":
            return self.reply(200, INDEX)
        if u.path == "/fetch":
            target = parse_qs(u.query).get("url", [""])[0]
            if not target.startswith(("http://", "https://")):
                return self.reply(400, "url must be http(s)\n", "text/plain")
            try:
                # VULNERABLE: no allow-list, private addresses included.
                with urllib.request.urlopen(target, timeout=5) as r:
                    body = r.read(65536).decode(errors="replace")
            except Exception as e:  # noqa: BLE001 - reported to the caller
                return self.reply(502, "fetch failed: %s\n" % html.escape(str(e)), "text/plain")
            return self.reply(200, body, "text/plain; charset=utf-8")
        return self.reply(404, "not found\n", "text/plain")

    def log_message(self, fmt, *args):
        sys.stdout.write("%s %s\n" % (self.address_string(), fmt % args))


if __name__ == "__main__":
    print("gateway listening on :8000 (vault at %s)" % VAULT_URL, flush=True)
    ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
