# The Docker provider's helper inside a sandbox, run as `python3 -c <this> CMD ARGS`.
# It keeps background processes and their output in the sandbox itself (under
# ROOT), so any backend replica, or a restarted backend, can read them again,
# and they die with the sandbox. Exit codes: 0 ok, 4 not found, 5 conflict,
# 6 invalid request; the message is on stderr.
#
# A process's directory ROOT/<pid> holds meta.json, out (its output as frames:
# type byte 1 stdout / 2 stderr (0: the reader found the process, 3: exit code), big-endian uint32 length, data; rotated to
# out.1 at 1 MiB, so the last 1..2 MiB are kept), exit (its exit code, written
# last) and, with stdin, a FIFO fed in frames (uint32 length, data; 0 = EOF).
import errno, fcntl, json, os, selectors, shutil, signal, stat, struct, sys, time

ROOT = "/run/dreadnode/proc"
ROTATE = 1 << 20


def fail(code, msg):
    sys.stderr.write(msg + "\n")
    sys.exit(code)


def pdir(pid):
    if not pid.isdigit():
        fail(6, "pid must be a number")
    d = os.path.join(ROOT, pid)
    if not os.path.isdir(d):
        fail(4, "no process with pid %s was started in this sandbox" % pid)
    return d


def start(spec):
    spec = json.loads(spec)
    os.makedirs(ROOT, exist_ok=True)
    rep_r, rep_w = os.pipe()
    if os.fork():
        os.close(rep_w)
        msg = b""
        while True:
            b = os.read(rep_r, 4096)
            if not b:
                break
            msg += b
        kind, _, rest = msg.decode().partition(" ")
        if kind != "ok":
            fail(6, rest or "the process could not be started")
        sys.stdout.write(rest)
        sys.exit(0)
    # The supervisor: detached from the docker exec that started it.
    os.close(rep_r)
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    env = dict(os.environ)
    env.pop("DREADNODE_EXEC_ID", None)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if spec.get("stdin") else (None, None)
    st_r, st_w = os.pipe()
    os.set_inheritable(st_w, False)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(in_r if in_r is not None else null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            if spec.get("cwd"):
                os.chdir(spec["cwd"])
            os.execvpe(spec["cmd"][0], spec["cmd"], env)
        except Exception as e:
            os.write(st_w, ("%s: %s" % (spec["cmd"][0], getattr(e, "strerror", None) or e)).encode())
        os._exit(127)
    for fd in (out_w, err_w, st_w) + ((in_r,) if in_r is not None else ()):
        os.close(fd)
    why = os.read(st_r, 4096)
    if why:
        os.waitpid(pid, 0)
        os.write(rep_w, b"err " + why)
        os._exit(1)
    d = os.path.join(ROOT, str(pid))
    shutil.rmtree(d, ignore_errors=True)  # a pid reused after an earlier process
    os.makedirs(d)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"pid": pid, "tag": spec.get("tag", ""), "cmd": spec["cmd"], "sup": os.getpid(),
                   "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
    open(os.path.join(d, "lock"), "w").close()
    fifo = os.path.join(d, "stdin")
    if in_w is not None:
        os.mkfifo(fifo, 0o600)
    os.write(rep_w, ("ok %d\n" % pid).encode())
    os.close(rep_w)
    supervise(d, pid, out_r, err_r, in_w, fifo)


def supervise(d, pid, out_r, err_r, in_w, fifo):
    log = os.path.join(d, "out")
    logf = open(log, "ab", buffering=0)
    size = 0
    sel = selectors.DefaultSelector()
    sel.register(out_r, selectors.EVENT_READ, 1)
    sel.register(err_r, selectors.EVENT_READ, 2)
    fifo_fd = keep = None
    inbuf, pending = b"", b""
    if in_w is not None:
        fifo_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        keep = os.open(fifo, os.O_WRONLY)  # so the FIFO never reads EOF between writers
        os.set_blocking(in_w, False)
        sel.register(fifo_fd, selectors.EVENT_READ, "in")
    open_streams, status, eof = 2, None, False

    def close_stdin():
        nonlocal fifo_fd, keep, in_w
        for fd in (fifo_fd, keep, in_w):
            if fd is not None:
                try:
                    sel.unregister(fd)
                except (KeyError, ValueError):
                    pass
                os.close(fd)
        fifo_fd = keep = in_w = None
        try:
            os.unlink(fifo)
        except OSError:
            pass

    while open_streams:
        for key, _ in sel.select(0.5):
            tag = key.data
            if tag in (1, 2):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fd)
                    open_streams -= 1
                    continue
                if size >= ROTATE:
                    with open(os.path.join(d, "lock"), "w") as lk:
                        fcntl.flock(lk, fcntl.LOCK_EX)
                        os.replace(log, log + ".1")
                        logf.close()
                        logf = open(log, "ab", buffering=0)
                    size = 0
                logf.write(struct.pack(">BI", tag, len(data)) + data)
                size += len(data) + 5
            elif tag == "in":
                inbuf += os.read(fifo_fd, 65536)
                while len(inbuf) >= 4:
                    n = struct.unpack(">I", inbuf[:4])[0]
                    if len(inbuf) < 4 + n:
                        break
                    if n == 0:
                        eof = True
                    pending += inbuf[4:4 + n]
                    inbuf = inbuf[4 + n:]
        if in_w is not None and (pending or eof):
            try:
                while pending:
                    pending = pending[os.write(in_w, pending):]
            except BlockingIOError:
                pass
            except OSError:  # the process closed its stdin
                pending, eof = b"", True
            try:
                sel.unregister(in_w)
            except (KeyError, ValueError):
                pass
            if pending:
                sel.register(in_w, selectors.EVENT_WRITE, "w")
            elif eof:
                close_stdin()
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                # Descendants may keep the pipes open: read what is there, then stop.
                for fd in (out_r, err_r):
                    os.set_blocking(fd, False)
        if status is not None and open_streams:
            until = time.monotonic() + 0.2
            try:
                while time.monotonic() < until:
                    moved = False
                    for key, _ in sel.select(0.05):
                        if key.data in (1, 2):
                            data = os.read(key.fd, 65536)
                            if data:
                                logf.write(struct.pack(">BI", key.data, len(data)) + data)
                                moved = True
                    if not moved:
                        break
            except BlockingIOError:
                pass
            break
    if status is None:
        _, status = os.waitpid(pid, 0)
    close_stdin()
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code  # killed by a signal: the shell's convention
    tmp = os.path.join(d, "exit.tmp")
    with open(tmp, "w") as f:
        f.write(str(code))
    os.replace(tmp, os.path.join(d, "exit"))


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def describe(d):
    with open(os.path.join(d, "meta.json")) as f:
        m = json.load(f)
    code = None
    try:
        with open(os.path.join(d, "exit")) as f:
            code = int(f.read())
    except FileNotFoundError:
        pass
    return {"pid": m["pid"], "tag": m["tag"], "cmd": m["cmd"], "startedAt": m["startedAt"],
            "running": code is None and alive(m["sup"]), "exitCode": code}


def listing():
    out = []
    try:
        names = os.listdir(ROOT)
    except FileNotFoundError:
        names = []
    for n in names:
        try:
            out.append(describe(os.path.join(ROOT, n)))
        except (OSError, ValueError, KeyError):
            pass
    out.sort(key=lambda p: (p["startedAt"], p["pid"]))
    json.dump(out, sys.stdout)


def output(pid, follow):
    d = pdir(pid)
    log, w = os.path.join(d, "out"), sys.stdout.buffer
    w.write(struct.pack(">BI", 0, 0))  # found: the stream begins
    w.flush()
    with open(os.path.join(d, "lock")) as lk:
        fcntl.flock(lk, fcntl.LOCK_SH)
        try:
            old = open(log + ".1", "rb")
        except FileNotFoundError:
            old = None
        try:
            cur = open(log, "rb")
        except FileNotFoundError:
            cur = None
    if old:
        shutil.copyfileobj(old, w)
        old.close()
    with open(os.path.join(d, "meta.json")) as f:
        sup = json.load(f)["sup"]
    wait = 0.002
    while True:
        exited = os.path.exists(os.path.join(d, "exit"))
        if cur is None:
            try:
                cur = open(log, "rb")
            except FileNotFoundError:
                pass
        data = cur.read(65536) if cur else b""
        if data:
            w.write(data)
            w.flush()
            wait = 0.002
            continue
        if cur and os.path.exists(log) and os.stat(log).st_ino != os.fstat(cur.fileno()).st_ino:
            cur.close()
            cur = None
            continue
        if exited:
            with open(os.path.join(d, "exit")) as f:
                code = int(f.read())
            w.write(struct.pack(">BIi", 3, 4, code))
            break
        if not follow or not alive(sup):  # a supervisor that died leaves no exit code
            break
        w.flush()
        time.sleep(wait)
        wait = min(wait * 2, 0.02)
    w.flush()


def stdin(pid, eof):
    d = pdir(pid)
    try:
        fd = os.open(os.path.join(d, "stdin"), os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENXIO):
            fail(5, "process %s has no open stdin (start it with \"stdin\": true; it may have exited or its stdin was closed)" % pid)
        raise
    os.set_blocking(fd, True)
    r = sys.stdin.buffer
    while True:
        chunk = r.read1(4092) if hasattr(r, "read1") else r.read(4092)
        if not chunk:
            break
        os.write(fd, struct.pack(">I", len(chunk)) + chunk)  # <= PIPE_BUF: atomic
    if eof == "1":
        os.write(fd, struct.pack(">I", 0))
    os.close(fd)


SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP}


def send_signal(pid, name):
    d = pdir(pid)
    if os.path.exists(os.path.join(d, "exit")):
        fail(5, "process %s has already exited" % pid)
    try:
        os.killpg(int(pid), SIGNALS[name])
    except ProcessLookupError:
        try:
            os.kill(int(pid), SIGNALS[name])
        except ProcessLookupError:
            fail(5, "process %s is not running" % pid)


def entry(p, name=None):
    s = os.lstat(p)
    kind = "symlink" if stat.S_ISLNK(s.st_mode) else "dir" if stat.S_ISDIR(s.st_mode) else "file"
    return {"name": name if name is not None else os.path.basename(p) or "/", "path": p, "type": kind,
            "size": s.st_size, "mode": stat.S_IMODE(s.st_mode), "mtime": s.st_mtime_ns}


def abspath(p):
    if not p.startswith("/"):
        fail(6, "path must be absolute, got %r" % p)
    return os.path.normpath(p)


def ls(p, depth):
    # One entry per line, written as it is found: the backend reads lines
    # as they come and stops at its bound, so neither side holds it all.
    p = abspath(p)
    try:
        if not os.path.isdir(p):
            print(json.dumps(entry(p)))
            return
    except FileNotFoundError:
        pass
    if not os.path.lexists(p):
        fail(4, "no such file or directory: %s" % p)
    out = sys.stdout

    def walk(d, level):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        for n in names:
            full = os.path.join(d, n)
            try:
                e = entry(full, n)
            except OSError:
                continue
            out.write(json.dumps(e) + "\n")
            if e["type"] == "dir" and level < depth:
                walk(full, level + 1)

    walk(p, 1)


def mkdir(p):
    p = abspath(p)
    try:
        os.makedirs(p, exist_ok=True)
    except FileExistsError:
        fail(5, "%s exists and is not a directory" % p)
    except NotADirectoryError:
        fail(5, "a parent of %s is not a directory" % p)


def remove(p):
    p = abspath(p)
    if p == "/":
        fail(6, "refusing to remove /")
    if not os.path.lexists(p):
        fail(4, "no such file or directory: %s" % p)
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
    else:
        os.remove(p)


def move(src, dst):
    src, dst = abspath(src), abspath(dst)
    if not os.path.lexists(src):
        fail(4, "no such file or directory: %s" % src)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.move(src, dst)


def watch(p):
    # Polls the directory's entries (every 50 ms): no inotify tool is in the
    # base image, and polling needs nothing but python3.
    p = abspath(p)
    if not os.path.isdir(p):
        fail(4 if not os.path.lexists(p) else 6, "%s is not a directory" % p)

    def snap():
        out = {}
        try:
            with os.scandir(p) as it:
                for e in it:
                    try:
                        s = e.stat(follow_symlinks=False)
                        out[e.name] = (s.st_ino, s.st_mtime_ns, s.st_size)
                    except OSError:
                        pass
        except OSError:
            return None
        return out

    prev = snap()
    sys.stdout.write('{"type":"ready"}\n')
    sys.stdout.flush()
    while True:
        time.sleep(0.05)
        cur = snap()
        if cur is None:
            sys.stdout.write(json.dumps({"type": "remove", "path": p}) + "\n")
            sys.stdout.flush()
            return
        lines = []
        for n in prev.keys() - cur.keys():
            lines.append({"type": "remove", "path": os.path.join(p, n)})
        for n in cur.keys() - prev.keys():
            lines.append({"type": "create", "path": os.path.join(p, n)})
        for n in cur.keys() & prev.keys():
            if cur[n][0] != prev[n][0]:
                lines.append({"type": "rename", "path": os.path.join(p, n)})
            elif cur[n] != prev[n]:
                lines.append({"type": "write", "path": os.path.join(p, n)})
        if lines:
            sys.stdout.write("".join(json.dumps(l) + "\n" for l in lines))
            sys.stdout.flush()
        prev = cur


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "start":
            start(args[0])
        elif cmd == "list":
            listing()
        elif cmd == "output":
            output(args[0], args[1] == "1")
        elif cmd == "stdin":
            stdin(args[0], args[1])
        elif cmd == "signal":
            send_signal(args[0], args[1])
        elif cmd == "ls":
            ls(args[0], int(args[1]))
        elif cmd == "mkdir":
            mkdir(args[0])
        elif cmd == "rm":
            remove(args[0])
        elif cmd == "move":
            move(args[0], args[1])
        elif cmd == "watch":
            watch(args[0])
        else:
            fail(6, "unknown helper command " + cmd)
    except BrokenPipeError:
        sys.exit(0)
    except PermissionError as e:
        fail(5, "permission denied: %s" % (e.filename or e))
    except NotADirectoryError as e:
        fail(6, "not a directory: %s" % (e.filename or e))


main()
