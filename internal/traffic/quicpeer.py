"""A QUIC peer whose latency spin bit spins (aioquic spins on every
connection), for rttscope's lab tests of the quic_spin source.

  quicpeer.py server ADDR PORT           serve until killed; prints "ready"
  quicpeer.py client ADDR PORT SECONDS   send a stream for SECONDS (4 KiB
                                         every 2 ms, 16 Mbit/s), then print
                                         the bytes the server got

The server uses a throw-away self-signed certificate; the client does not
verify it. Nothing here measures: rttscope observes the packets.
"""

import asyncio
import datetime
import os
import ssl
import sys
import tempfile
import time

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

ALPN = ["rttscope-lab"]
CHUNK = b"x" * 4096


def self_signed(directory):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rttscope-lab")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(directory, "cert.pem")
    key_path = os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


class Sink(QuicConnectionProtocol):
    """Counts a stream's bytes; answers the count when it ends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = 0

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self.received += len(event.data)
            if event.end_stream:
                self._quic.send_stream_data(
                    event.stream_id, str(self.received).encode(), end_stream=True
                )
                self.transmit()


async def run_server(addr, port):
    with tempfile.TemporaryDirectory() as d:
        cfg = QuicConfiguration(is_client=False, alpn_protocols=ALPN)
        cfg.load_cert_chain(*self_signed(d))
        await serve(addr, port, configuration=cfg, create_protocol=Sink)
        print("ready", flush=True)
        await asyncio.Future()


async def run_client(addr, port, seconds):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=ALPN, verify_mode=ssl.CERT_NONE)
    async with connect(addr, port, configuration=cfg) as conn:
        reader, writer = await conn.create_stream()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            writer.write(CHUNK)
            # Paced below what the lab forwards, so that no queue builds
            # up: the spin period is then the path's RTT.
            await asyncio.sleep(0.002)
        writer.write_eof()
        print((await reader.read()).decode(), flush=True)


def main(argv):
    if len(argv) == 4 and argv[1] == "server":
        asyncio.run(run_server(argv[2], int(argv[3])))
    elif len(argv) == 5 and argv[1] == "client":
        asyncio.run(run_client(argv[2], int(argv[3]), float(argv[4])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
