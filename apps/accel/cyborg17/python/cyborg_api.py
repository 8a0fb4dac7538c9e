"""Real Cyborg 17's API service (the pinned openstack-cyborg 17.0.0's WSGI application,
`cyborg.wsgi.api`) under the standard library's WSGI server, for `accel demo --from
cyborg`: Cyborg 17's `cyborg-api` console script cannot start with oslo.service's
threading backend ("deploy via standard WSGI servers instead"), and its WSGI entry
point reads its configuration from the command line.

    cyborg_api.py --config FILE --listen HOST:PORT

FILE's [api] api_paste_config names the paste pipeline (the demo's has no Keystone
middleware: Cyborg's context hook then takes the caller's roles and project from the
X-Roles and X-Project-Id headers, so it listens on loopback only). Prints
`serving on HOST:PORT` once listening.
"""

import argparse
import socketserver
import sys
import warnings
from wsgiref import simple_server

warnings.filterwarnings("ignore")


class Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--listen", required=True)
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    # cyborg.wsgi.api prepares the service from sys.argv.
    sys.argv = ["cyborg-api", "--config-file", args.config]
    from cyborg.wsgi import api  # noqa: E402

    server = simple_server.make_server(
        host, int(port), api.application, server_class=Server, handler_class=Quiet
    )
    print(f"serving on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
