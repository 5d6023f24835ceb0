"""A ZMQ XSUB/XPUB forwarder for the local engine's event plane, bound to 127.0.0.1 only.

Dynamo's direct ZMQ event plane binds every publisher socket to 0.0.0.0 (only the advertised
address follows DYN_EVENT_PLANE_HOST). In broker mode (DYN_ZMQ_BROKER_URL) publishers and
subscribers connect to a broker instead, so with this broker on loopback nothing of the local
engine listens beyond 127.0.0.1. Run: `python zmq_broker.py`; it prints its two ports as one
JSON line, then forwards until SIGTERM. Standalone on purpose: it runs in the engine's venv.
"""

import json
import signal
import sys

import zmq


def main() -> None:
    ctx = zmq.Context()
    xsub = ctx.socket(zmq.XSUB)
    xpub = ctx.socket(zmq.XPUB)
    xsub_port = xsub.bind_to_random_port("tcp://127.0.0.1")
    xpub_port = xpub.bind_to_random_port("tcp://127.0.0.1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(json.dumps({"xsub": xsub_port, "xpub": xpub_port}), flush=True)
    try:
        zmq.proxy(xsub, xpub)
    except (KeyboardInterrupt, SystemExit, zmq.ContextTerminated):
        pass
    finally:
        xsub.close(0)
        xpub.close(0)
        ctx.term()


if __name__ == "__main__":
    main()
