"""A deliberately vulnerable login page (task web-login).

The login query is built by string formatting, so a username such as
    admin' --
or a password such as
    ' OR '1'='1
logs in as the administrator, who sees the flag.
"""
import html
import os
import sqlite3
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

FLAG = os.environ.get("FLAG", "FLAG{unset}")
ADMIN_PASSWORD = os.environ.get("ADMIN_PASSWORD", "admin")

db = sqlite3.connect(":memory:", check_same_thread=False)
db.execute("CREATE TABLE users (username TEXT, password TEXT, role TEXT)")
db.execute("INSERT INTO users VALUES ('admin', ?, 'admin')", (ADMIN_PASSWORD,))
db.execute("INSERT INTO users VALUES ('guest', 'guest', 'user')")
db.commit()

FORM = """<!doctype html><title>Intranet login</title>
<h1>Intranet login</h1>
<form method="post" action="/login">
<label>Username <input name="username"></label>
<label>Password <input name="password" type="password"></label>
<button>Log in</button></form>
<p>Guests may log in as guest/guest.</p>
"""


class Handler(BaseHTTPRequestHandler):
    server_version = "intranet/1.0"

    def reply(self, code, body, ctype="text/html; charset=utf-8"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, "ok\n", "text/plain")
        if self.path in ("/", "/login"):
            return self.reply(200, FORM)
        return self.reply(404, "not found\n", "text/plain")

    def do_POST(self):
        if self.path != "/login":
            return self.reply(404, "not found\n", "text/plain")
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode(errors="replace"))
        user = form.get("username", [""])[0]
        password = form.get("password", [""])[0]
        # VULNERABLE: the query is built by string formatting.
        query = "SELECT username, role FROM users WHERE username = '%s' AND password = '%s'" % (user, password)
        try:
            row = db.execute(query).fetchone()
        except sqlite3.Error as e:
            return self.reply(500, "database error: %s\n" % html.escape(str(e)))
        if row is None:
            return self.reply(401, "<p>Invalid username or password.</p>\n")
        name, role = row
        body = "<p>Welcome, %s.</p>\n" % html.escape(name)
        if role == "admin":
            body += "<p>Administrator flag: %s</p>\n" % html.escape(FLAG)
        return self.reply(200, body)

    def log_message(self, fmt, *args):
        sys.stdout.write("%s %s\n" % (self.address_string(), fmt % args))


if __name__ == "__main__":
    print("web-login listening on :8080", flush=True)
    ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
