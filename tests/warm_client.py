"""The client of tests/warm.py, run as `python -I -S warm_client.py SOCKET ARGS…` (standard library only, so it
starts in milliseconds): hands the server this process's stdin, stdout and stderr, working folder, environment
and `models` arguments, and exits with the forked command's status."""

import json
import os
import socket
import sys


def main() -> int:
    path, argv = sys.argv[1], sys.argv[2:]
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    if not answer:
        print("warm interpreter: the command's process ended without a status", file=sys.stderr)
        return 1
    return int(json.loads(answer)["code"])


if __name__ == "__main__":
    sys.exit(main())
