"""A TLS handshake in memory: which certificate a server context serves, checked against a CA bundle."""

from __future__ import annotations

import ssl

from cryptography import x509


def _step(side: ssl.SSLObject) -> bool:
    try:
        side.do_handshake()
    except ssl.SSLWantReadError:
        return False
    return True


def served_certificate(server: ssl.SSLContext, ca_bundle: str, host: str) -> x509.Certificate:
    """The certificate ``server`` presents to a client that trusts ``ca_bundle`` and asks for ``host``;
    ``ssl.SSLError`` when that client would refuse it."""
    client_context = ssl.create_default_context(cadata=ca_bundle)
    to_client, from_client, to_server, from_server = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(to_client, from_client, server_hostname=host)
    served = server.wrap_bio(to_server, from_server, server_side=True)
    client_done = server_done = False
    for _ in range(10):
        client_done = client_done or _step(client)
        to_server.write(from_client.read())
        server_done = server_done or _step(served)
        to_client.write(from_server.read())
        if client_done and server_done:
            break
    der = client.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)
