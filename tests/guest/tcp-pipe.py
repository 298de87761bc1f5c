#!/usr/bin/env python3
"""Joins stdin/stdout to a TCP connection: qemu's `guestfwd=…-cmd:` runs one per connection
the guest opens, so the cloud scenarios' guests can open as many connections to the host's
services as they like (a `guestfwd=…-tcp:` forward is a single connection made at start).

    tcp-pipe.py HOST PORT
"""
import os
import selectors
import socket
import sys

sock = socket.create_connection((sys.argv[1], int(sys.argv[2])))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(sock, selectors.EVENT_READ)
open_ends = 2
while open_ends:
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if data:
                sock.sendall(data)
            else:
                sel.unregister(0)
                sock.shutdown(socket.SHUT_WR)
                open_ends -= 1
        else:
            data = sock.recv(65536)
            if data:
                os.write(1, data)
            else:
                sel.unregister(sock)
                os.close(1)
                open_ends -= 1
