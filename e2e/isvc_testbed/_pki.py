"""A throw-away PKI for one cluster: CA, API server serving cert, client certs and the SA signing key."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVICE_IP = "10.96.0.1"
SERVING_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class CertFiles:
    """PEM files of one certificate and its key."""

    cert: Path
    key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class Pki:
    """Makes and writes the PKI of one cluster under `directory`."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("isvc-testbed-ca"))
            .issuer_name(_name("isvc-testbed-ca"))
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = self._write("ca", self._ca_cert, self._ca_key)
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key = self.dir / "sa.key"
        self.sa_key.write_bytes(_key_pem(sa_key))
        self.sa_pub = self.dir / "sa.pub"
        self.sa_pub.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    @property
    def ca_pem(self) -> bytes:
        """The CA certificate in PEM form."""
        return self.ca.cert.read_bytes()

    def _write(self, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertFiles:
        files = CertFiles(self.dir / f"{stem}.crt", self.dir / f"{stem}.key")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files.key.write_bytes(_key_pem(key))
        files.key.chmod(0o600)
        return files

    def _issue(
        self, stem: str, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return self._write(stem, builder.sign(self._ca_key, hashes.SHA256()), key)

    def serving(
        self, stem: str = "apiserver", names: tuple[str, ...] = SERVING_DNS, cn: str = "kube-apiserver"
    ) -> CertFiles:
        """A serving certificate: loopback, the first service IP and `names` (the API server's in-cluster
        names unless told; an aggregated API server's are its Service's)."""
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", SERVICE_IP)]
        return self._issue(stem, _name(cn), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> CertFiles:
        """A client certificate: CN is the user name, O the groups."""
        return self._issue(stem, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH, [])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    server: str,
    ca_pem: bytes,
    user: str,
    *,
    cert: CertFiles | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A one-context kubeconfig with everything embedded, for a client cert or a bearer token."""
    auth: dict[str, str] = {}
    if cert is not None:
        auth["client-certificate-data"] = _b64(cert.cert.read_bytes())
        auth["client-key-data"] = _b64(cert.key.read_bytes())
    if token is not None:
        auth["token"] = token
    context: dict[str, str] = {"cluster": "isvc-testbed", "user": user}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "isvc-testbed",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": auth}],
        "contexts": [{"name": user, "context": context}],
        "current-context": user,
    }


def write_kubeconfig(path: Path, config: dict[str, Any]) -> Path:
    """Write a kubeconfig readable only by its owner."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def client_request(directory: Path, stem: str, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, bytes]:
    """A new client key (written to `<stem>.key`) and the PEM certificate signing request for it.

    For a cluster whose CA key we do not hold: the request goes to the certificates API
    (signer `kubernetes.io/kube-apiserver-client`); CN is the user name, O the groups.
    """
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    key_file = directory / f"{stem}.key"
    key_file.write_bytes(_key_pem(key))
    key_file.chmod(0o600)
    csr = x509.CertificateSigningRequestBuilder().subject_name(_name(user, groups)).sign(key, hashes.SHA256())
    return key_file, csr.public_bytes(serialization.Encoding.PEM)


def cluster_of(kubeconfig_file: Path) -> tuple[str, bytes]:
    """The server URL and CA certificate (PEM) of a kubeconfig's current context."""
    config = yaml.safe_load(kubeconfig_file.read_text())
    current = config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
    context = contexts.get(current) or next(iter(contexts.values()))
    cluster = clusters[context["cluster"]]
    if "certificate-authority-data" in cluster:
        ca = base64.b64decode(cluster["certificate-authority-data"])
    else:
        ca_path = Path(cluster["certificate-authority"])
        ca = (ca_path if ca_path.is_absolute() else kubeconfig_file.parent / ca_path).read_bytes()
    return str(cluster["server"]), ca
