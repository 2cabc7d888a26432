"""PKI for the cluster lab: one CA for the control plane, one front-proxy CA for the
aggregation layer, client certificates per component, serving certificates, and the
service-account signing key. ECDSA P-256 throughout (fast to generate, accepted by
every component). Written once per run directory.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=30)

# Client identities: file stem -> (CN, O). system:masters is the lab's admin group.
CLIENTS: dict[str, tuple[str, str | None]] = {
    "admin": ("kgc-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", None),
    "scheduler": ("system:kube-scheduler", None),
    "kwok": ("kgc-kwok", "system:masters"),
    "keda": ("kgc-keda", "system:masters"),
    "kubelet-client": ("kube-apiserver-kubelet-client", "system:masters"),
}


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _ca(
    directory: Path, stem: str, cn: str
) -> tuple[KeyPair, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair, cert, key


def _leaf(
    directory: Path,
    stem: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    cn: str,
    org: str | None = None,
    *,
    server: bool = False,
    client: bool = False,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> KeyPair:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, key_cert_sign=False,
                crl_sign=False, content_commitment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if dns or ips:
        alt: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        alt += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair


@dataclass(frozen=True)
class Pki:
    directory: Path

    @property
    def ca(self) -> KeyPair:
        return KeyPair(self.directory / "ca.crt", self.directory / "ca.key")

    @property
    def front_proxy_ca(self) -> KeyPair:
        return KeyPair(self.directory / "front-proxy-ca.crt", self.directory / "front-proxy-ca.key")

    @property
    def apiserver(self) -> KeyPair:
        return KeyPair(self.directory / "apiserver.crt", self.directory / "apiserver.key")

    @property
    def front_proxy_client(self) -> KeyPair:
        return KeyPair(
            self.directory / "front-proxy-client.crt", self.directory / "front-proxy-client.key"
        )

    @property
    def kwok_serving(self) -> KeyPair:
        return KeyPair(self.directory / "kwok-serving.crt", self.directory / "kwok-serving.key")

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def keda_dir(self) -> Path:
        """KEDA's gRPC mTLS material in the layout it expects (ca.crt, tls.crt, tls.key)."""
        return self.directory / "keda"

    def client(self, stem: str) -> KeyPair:
        return KeyPair(self.directory / f"client-{stem}.crt", self.directory / f"client-{stem}.key")


def generate(directory: Path, service_ip: str = "10.96.0.1") -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    _, ca_cert, ca_key = _ca(directory, "ca", "kgc-lab-ca")
    _, fp_cert, fp_key = _ca(directory, "front-proxy-ca", "kgc-lab-front-proxy-ca")
    _leaf(
        directory, "apiserver", ca_cert, ca_key, "kube-apiserver", server=True,
        dns=(
            "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ips=("127.0.0.1", service_ip),
    )
    _leaf(directory, "kwok-serving", ca_cert, ca_key, "kwok", server=True,
          dns=("localhost",), ips=("127.0.0.1",))
    _leaf(directory, "front-proxy-client", fp_cert, fp_key, "front-proxy-client", client=True)
    for stem, (cn, org) in CLIENTS.items():
        _leaf(directory, f"client-{stem}", ca_cert, ca_key, cn, org, client=True)
    keda = directory / "keda"
    keda.mkdir(exist_ok=True)
    (keda / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _leaf(
        keda, "tls", ca_cert, ca_key, "keda-operator", server=True, client=True,
        dns=(
            "localhost", "keda-operator", "keda-operator.keda.svc",
            "keda-operator.keda.svc.cluster.local", "keda-metrics-apiserver.keda.svc",
        ),
        ips=("127.0.0.1",),
    )
    sa = _key()
    _write_key(directory / "sa.key", sa)
    (directory / "sa.pub").write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(directory)


def kubeconfig(pki: Pki, server: str, stem: str, path: Path, context: str = "kgc-lab") -> Path:
    """Write a kubeconfig for client identity ``stem`` with certificates embedded."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    pair = pki.client(stem)
    user = f"kgc-lab-{stem}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kgc-lab",
                "cluster": {"server": server, "certificate-authority-data": b64(pki.ca.cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(pair.cert),
                    "client-key-data": b64(pair.key),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": "kgc-lab", "user": user}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def issue(pki: Pki, directory: Path, stem: str, cn: str, org: str | None = None, *,
          server: bool = False, client: bool = False, dns: tuple[str, ...] = (),
          ips: tuple[str, ...] = ()) -> KeyPair:
    """Sign one more leaf with the run's CA (e.g. a joining node's kubelet credentials)."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki.ca.key}: not the lab's ECDSA CA key")
    directory.mkdir(parents=True, exist_ok=True)
    return _leaf(directory, stem, ca_cert, ca_key, cn, org, server=server, client=client,
                 dns=dns, ips=ips)
