"""A webhook receiver with only the standard library.

    COMMERCE_WEBHOOK_SECRET=whsec_… .venv/bin/python client/examples/webhook_receiver.py

Register http://localhost:9000/webhooks with ``client.webhook_endpoints.create(url=...)`` (the
sandbox accepts local URLs) and keep the ``secret`` it returns.
"""

from __future__ import annotations

import os
from http.server import BaseHTTPRequestHandler, HTTPServer

import commerce_client

SECRET = os.environ["COMMERCE_WEBHOOK_SECRET"]
seen: set[str] = set()  # deliveries are retried with the same id: handle each once


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            event = commerce_client.verify_webhook(body, self.headers, SECRET)
        except commerce_client.WebhookVerificationError as exc:
            self.send_error(400, str(exc))
            return
        if event.id not in seen:
            seen.add(event.id)
            if isinstance(event.data, commerce_client.Order):
                print(f"{event.type}: order {event.data.id} is {event.data.status}")
        self.send_response(200)  # also for types we do not handle
        self.end_headers()


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", 9000), Receiver).serve_forever()
