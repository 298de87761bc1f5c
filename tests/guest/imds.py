#!/usr/bin/env python3
"""The instance metadata service (IMDSv2) of one emulated EC2 instance, for the cloud guest
scenarios: moto's server answers the EC2 API but serves no metadata to instances, so the
harness reads the instance from moto and serves what EC2's IMDS would (a token first, then
meta-data with it). The guest reaches it at 169.254.169.254 through qemu's guestfwd.

    imds.py PORT INSTANCE_JSON     (the instance as `aws ec2 describe-instances` shows it)
"""
import json
import secrets
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    instance = json.load(f)
zone = instance["Placement"]["AvailabilityZone"]
META = {
    "instance-id": instance["InstanceId"],
    "instance-type": instance["InstanceType"],
    "placement/availability-zone": zone,
    "placement/region": zone.rstrip("abcdefghijklmnopqrstuvwxyz"),
}
TOKENS = set()


class Handler(BaseHTTPRequestHandler):
    def answer(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.answer(400, "bad token request")
        token = secrets.token_hex(16)
        TOKENS.add(token)
        return self.answer(200, token)

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") not in TOKENS:
            return self.answer(401, "")
        prefix = "/latest/meta-data/"
        key = self.path[len(prefix):] if self.path.startswith(prefix) else None
        if key not in META:
            return self.answer(404, "")
        return self.answer(200, META[key])

    def log_message(self, fmt, *args):
        sys.stderr.write("imds: " + (fmt % args) + "\n")


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
