"""A warm interpreter for tests that run `python -m models …` as a reader types it.

Importing torch and transformers costs a command about 3.5 s of CPU before it does anything; the documented
commands (tests/docs/test_commands.py) are some seventy such processes. Here one server per pytest worker imports
them once, then forks a child per command: the child takes the caller's stdin, stdout and stderr (passed over a
Unix socket), its working folder, environment and arguments, runs `models/__main__.py` exactly as `python -m models`
would, and sends back its exit status. A fork is a fresh process: nothing a command does reaches the next one.

`shims(folder)` writes `python` and `attention-lens` into folder: `python -m models …` and `attention-lens …` go to
the server, anything else goes to the real interpreter. Put folder first on PATH.

The server does no torch arithmetic before forking (a forked child cannot use a parent's OpenMP pool), and it kills
what it forked when it stops.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT = Path(__file__).with_name("warm_client.py")
PRELOAD = ("torch", "transformers", "models", "models.cli", "models.network", "models.encoder")


def _child(conn: socket.socket, fds: list[int], request: dict) -> None:
    """In the forked child: become the command, then exit with its status (never returns)."""
    import io
    import runpy
    import threading

    code = 1
    try:
        os.setpgid(0, 0)  # its own group: the server can stop it and whatever it starts

        def watch() -> None:  # the caller gone (killed at its timeout): so is the command, and all it started
            if not conn.recv(1):
                os.killpg(0, signal.SIGKILL)

        threading.Thread(target=watch, daemon=True).start()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # Fresh standard streams on the new descriptors, made as Python's start-up makes them.
        sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding="utf-8", line_buffering=os.isatty(1))
        sys.stderr = io.TextIOWrapper(
            open(2, "wb", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
        sys.argv = ["-m", *request["argv"]]
        sys.path[0] = request["cwd"]  # as `python -m` puts the working folder first
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server's settings are not the command's
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python's start-up leaves it
        try:
            runpy.run_module("models", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            c = stop.code
            code = 0 if c is None else c if isinstance(c, int) else 1
            if not isinstance(c, int) and c is not None:
                print(c, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - as the interpreter does: the traceback on stderr, status 1
            import traceback

            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed pipe: the interpreter says nothing more either
    finally:
        try:
            conn.sendall(json.dumps({"code": code}).encode())
        finally:
            os._exit(code & 0xFF)


def serve(path: str) -> None:
    """Import once, then fork a child per request until stopped."""
    for name in PRELOAD:
        __import__(name)
    from models.cli import COMMAND_MODULES

    for module in COMMAND_MODULES.values():
        __import__(f"models.cli.{module}")
    children: set[int] = set()

    def stop(*_: object) -> None:
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel; they report over the socket
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        while not msg.endswith(b"\n"):  # the request is one line; a stream may deliver it in parts
            part = conn.recv(1 << 16)
            if not part:
                break
            msg += part
        request = json.loads(msg)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            server.close()
            _child(conn, fds, request)
        children.add(pid)
        children.intersection_update(p for p in children if _alive(p))
        for fd in fds:
            os.close(fd)
        conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


class Warm:
    """The server, started in a folder of its own; `env` is the environment it imports under."""

    def __init__(self, folder: Path, env: dict[str, str]):
        self.socket = str(folder / "warm.sock")
        self.bin = folder / "bin"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.warm", self.socket],
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise RuntimeError(f"the warm interpreter did not start: {line!r}")
        self.shims()

    def command(self, argv: list[str]) -> list[str]:
        """What to run instead of `[python, -m, models, *argv]`."""
        return [sys.executable, "-I", "-S", str(CLIENT), self.socket, *argv]

    def shims(self) -> None:
        self.bin.mkdir(exist_ok=True)
        real = sys.executable
        client = f'"{real}" -I -S "{CLIENT}" "{self.socket}"'
        (self.bin / "python").write_text(
            "#!/bin/sh\n"
            f'if [ "$1" = "-m" ] && [ "$2" = "models" ]; then shift 2; exec {client} "$@"; fi\n'
            f'exec "{real}" "$@"\n'
        )
        (self.bin / "attention-lens").write_text(f'#!/bin/sh\nexec {client} "$@"\n')
        for f in ("python", "attention-lens"):
            (self.bin / f).chmod(0o755)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc.stdout:
            self.proc.stdout.close()


if __name__ == "__main__":
    serve(sys.argv[1])
