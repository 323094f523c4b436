"""TLS for SSL and SASL_SSL listeners: an ``ssl.SSLContext`` from Kafka's PEM configs, and the
self-signed CA and certificates of ``kemu serve --tls-self-signed``.

Keystore (``ssl.keystore.type=PEM``, the only type kemu reads): ``ssl.keystore.certificate.chain``
and ``ssl.keystore.key`` hold PEM text, or ``ssl.keystore.location`` names a PEM file with the
private key and the certificate chain; ``ssl.key.password`` decrypts an encrypted key.
Truststore (``ssl.truststore.type=PEM``): ``ssl.truststore.certificates`` (PEM text) or
``ssl.truststore.location`` (a PEM file). ``ssl.client.auth``: ``none``, ``requested`` (a
certificate is asked for and checked if sent) or ``required``. Each may be prefixed with
``listener.name.<listener>.``.

Omissions: JKS/PKCS12 stores, ``ssl.enabled.protocols``, ``ssl.cipher.suites``, hostname
verification of client certificates (Kafka does none either), keystore reloading.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kemu.cluster.listeners import Listener, listener_value
from kemu.config.definitions import BrokerConfig, InvalidConfig

CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(config: BrokerConfig, listener: Listener) -> ssl.SSLContext:
    """The TLS context of one listener; InvalidConfig names what is missing or wrong."""

    def get(name: str) -> str | None:
        return listener_value(config, listener.name, name)

    for type_name in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (get(type_name) or "PEM").upper()
        if kind != "PEM":
            raise InvalidConfig(
                f"Invalid value {kind} for configuration {type_name}: kemu reads PEM stores only "
                f"(listener {listener.name})"
            )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = get("ssl.key.password")
    chain, key, location = (
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.key"),
        get("ssl.keystore.location"),
    )
    try:
        if chain and key:
            with tempfile.TemporaryDirectory(prefix="kemu-tls-") as private:
                cert_path, key_path = Path(private, "chain.pem"), Path(private, "key.pem")
                cert_path.write_text(_pem(chain))
                key_path.touch(mode=0o600)
                key_path.write_text(_pem(key))
                context.load_cert_chain(cert_path, key_path, password=password)
        elif location:
            context.load_cert_chain(location, password=password)
        else:
            raise InvalidConfig(
                f"Listener {listener.name} ({listener.protocol}) needs a keystore: "
                "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key "
                "(or kemu serve --tls-self-signed)"
            )
        certificates, trust_location = (
            get("ssl.truststore.certificates"),
            get("ssl.truststore.location"),
        )
        if certificates:
            context.load_verify_locations(cadata=_pem(certificates))
        elif trust_location:
            context.load_verify_locations(cafile=trust_location)
    except (ssl.SSLError, OSError) as error:
        raise InvalidConfig(
            f"Listener {listener.name}: cannot load the keystore or truststore: {error}"
        ) from None
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in CLIENT_AUTH:
        raise InvalidConfig(
            f"Invalid value {auth} for configuration ssl.client.auth: String must be one of: "
            "required, requested, none"
        )
    context.verify_mode = CLIENT_AUTH[auth]
    return context


def _pem(text: str) -> str:
    # A PEM block pasted into a properties file may have lost its line breaks.
    return text.replace("\\n", "\n").strip() + "\n"


def peer_principal(certificate: dict[str, object] | None) -> str:
    """Kafka's default SSL principal: ``User:`` and the subject's RFC 2253 distinguished name
    (``CN=...,OU=...``, most specific first); ``User:ANONYMOUS`` without a client certificate."""
    if not certificate:
        return "User:ANONYMOUS"
    subject = certificate.get("subject", ())
    parts: list[str] = []
    names = {
        "commonName": "CN",
        "organizationName": "O",
        "organizationalUnitName": "OU",
        "countryName": "C",
        "stateOrProvinceName": "ST",
        "localityName": "L",
    }
    for rdn in reversed(subject) if isinstance(subject, tuple) else ():
        for key, value in rdn:
            parts.append(f"{names.get(key, key)}={value}")
    return "User:" + ",".join(parts)


# --- kemu serve --tls-self-signed ---------------------------------------------------------------


@dataclass(frozen=True)
class SelfSigned:
    directory: Path
    ca: Path  # the CA certificate clients trust
    server_chain: Path
    server_key: Path
    client_chain: Path  # a client certificate the CA signed, for ssl.client.auth tests
    client_key: Path


def self_signed(directory: Path) -> SelfSigned:
    """A CA, a server certificate for localhost/127.0.0.1/::1 and a client certificate, as PEM
    files in ``directory``; made once and kept (a restart serves the same CA)."""
    paths = SelfSigned(
        directory,
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "client.pem",
        directory / "client.key",
    )
    if all(
        p.exists()
        for p in (
            paths.ca,
            paths.server_chain,
            paths.server_key,
            paths.client_chain,
            paths.client_key,
        )
    ):
        return paths
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kemu self-signed CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage: x509.ObjectIdentifier, server: bool) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kemu"),
                    ]
                )
            )
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=825))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("::1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,  # what Kafka's PEM keystore reads
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem

    server_cert, server_key = leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH, True)
    client_cert, client_key = leaf("kemu-client", ExtendedKeyUsageOID.CLIENT_AUTH, False)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    _write(paths.server_key, server_key, private=True)
    _write(paths.server_chain, server_cert + ca_pem)
    _write(paths.client_key, client_key, private=True)
    _write(paths.client_chain, client_cert + ca_pem)
    _write(paths.ca, ca_pem)  # last: its presence means the set is complete
    return paths


def _write(path: Path, data: bytes, private: bool = False) -> None:
    temporary = path.with_name(path.name + ".tmp")
    mode = 0o600 if private else 0o644
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    temporary.replace(path)


def self_signed_defaults(paths: SelfSigned) -> dict[str, str]:
    """Broker configs that serve ``paths`` on every TLS listener (explicit configs win)."""
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(paths.server_key.with_name("server-keystore.pem")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(paths.ca),
    }


def write_keystore(paths: SelfSigned) -> Path:
    """``server-keystore.pem``: key then chain in one file, as ``ssl.keystore.location`` wants."""
    keystore = paths.directory / "server-keystore.pem"
    _write(keystore, paths.server_key.read_bytes() + paths.server_chain.read_bytes(), private=True)
    return keystore
