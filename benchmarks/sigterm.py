"""How long a stillweb-server takes to exit on SIGTERM with connections open and no request in
flight: `idle` (three keep-alive connections, idle after one request each), `fresh` (connected,
nothing sent), `partial` (half a request's headers sent) or `all` of them.

    python3 benchmarks/sigterm.py target/debug/stillweb-server INDEX MODE [RUNS=3]
"""
import signal
import socket
import subprocess
import sys
import time

binary, index, mode = sys.argv[1], sys.argv[2], sys.argv[3]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
for _ in range(runs):
    server = subprocess.Popen([binary, "--index", index, "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(server.stdout.readline().decode().strip().rsplit(":", 1)[1])
    open_connections = []
    if mode in ("idle", "all"):
        for _ in range(3):
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            c.recv(65536)
            open_connections.append(c)
    if mode in ("fresh", "all"):
        open_connections.append(socket.create_connection(("127.0.0.1", port)))
    if mode in ("partial", "all"):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        open_connections.append(c)
    time.sleep(0.5)
    sent = time.time()
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=60)
        print(f"{mode}: exited {time.time() - sent:.2f} s after SIGTERM")
    except subprocess.TimeoutExpired:
        print(f"{mode}: still running 60 s after SIGTERM")
        server.kill()
