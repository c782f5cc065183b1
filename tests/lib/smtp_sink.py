"""smtp_sink.py - a real SMTP server for the mail tests (Debian's python3-aiosmtpd), on
127.0.0.1 only: it keeps every message it is given as DIR/N.eml (the bytes as received) with
DIR/N.json (the envelope's sender and recipients, whether the connection was TLS and which
user authenticated), and runs until SIGTERM.

  --mode starttls  plain SMTP that offers STARTTLS and requires it before MAIL, AUTH required
                   (what smtp://host:587 is)
  --mode smtps     TLS from the first byte, AUTH required (smtps://host:465)
  --mode plain     no TLS offered at all, AUTH not offered (a server apbot must refuse)

usage: smtp_sink.py --mode M --dir DIR --port-file F --cert PEM --key PEM --user U --password P
The port it listens on is written to F once it accepts connections.
"""
import argparse
import json
import os
import signal
import socket
import ssl
import sys
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Keep:
    def __init__(self, out):
        self.out = out
        self.n = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        tls = server.transport.get_extra_info("ssl_object") is not None
        with self.lock:
            self.n += 1
            n = self.n
        with open(os.path.join(self.out, "%d.eml" % n), "wb") as f:
            f.write(envelope.original_content or envelope.content)
        meta = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "tls": tls,
            "auth_user": session.auth_data.login.decode() if session.authenticated else None,
        }
        with open(os.path.join(self.out, "%d.json" % n), "w") as f:
            json.dump(meta, f)
        return "250 Message accepted for delivery"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["starttls", "smtps", "plain"], required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    a = ap.parse_args()

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (isinstance(auth_data, LoginPassword) and auth_data.login == a.user.encode()
              and auth_data.password == a.password.encode())
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(a.cert, a.key)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    common = dict(hostname="127.0.0.1", port=port, server_hostname="localhost")
    if a.mode == "starttls":
        ctl = Controller(Keep(a.dir), tls_context=ctx, require_starttls=True,
                         auth_required=True, auth_require_tls=True,
                         authenticator=authenticator, **common)
    elif a.mode == "smtps":
        ctl = Controller(Keep(a.dir), ssl_context=ctx, auth_required=True,
                         auth_require_tls=False, authenticator=authenticator, **common)
    else:
        ctl = Controller(Keep(a.dir), auth_require_tls=True, **common)
    ctl.start()
    with open(a.port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(a.port_file + ".tmp", a.port_file)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait(600)  # bounded: a test never runs this long
    ctl.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
